"""The hub's client side: what goes to the client, through its face.

:class:`ClientLink` is ``hub.client`` (:mod:`.hub`): a session's updates and the features'
facts, rendered by the face ``initialize`` chose (:class:`Face`, v1's until then); the
answers to the client's requests, each answered once; the requests the bridge makes of the
client (a permission, an elicitation), and their withdrawal; the client's long requests it
may cancel. Its effects go out in one order with Codex's: it writes to the hub's list of
effects. ``update`` is the hot path: every streamed delta's chunk comes this way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeAlias

import msgspec
from msgspec import Raw

from ...acp import permissions as acp_permissions
from ...jsonrpc import ErrorCode, Peer, RequestId, RpcError
from . import effects
from .answers import OnError, Outstanding, answering
from .facts import Fact
from .outbox import update_effect
from .threads import Threads
from .turns import TURN_TRAFFIC, insert_awaited

log = logging.getLogger(__name__)

#: Handles one client request: its id and its raw params.
RequestHandler: TypeAlias = Callable[[RequestId, Raw], None]


class Face(Protocol):
    """How the client is spoken to: ACP v1 (:mod:`bridge.engine.faces.v1`, from the start)
    or v2 (:mod:`bridge.engine.faces.v2`), chosen by ``initialize``. A face renders the
    features' updates and facts (:mod:`bridge.engine.core.facts`) in its version's
    messages, and decodes its version's requests once, for the features that do them."""

    #: The ACP protocol version spoken.
    version: int
    #: Update types whose rendering is the update as it is: the hub sends them without
    #: asking the face (the streamed chunks: the hot path).
    same: frozenset[type]
    #: The client requests this version has: method → handler of the raw params.
    requests: Mapping[str, RequestHandler]

    def update(self, session_id: str, update: Any) -> None: ...

    def state(self, fact: Fact) -> None: ...

    def answer(self, rid: RequestId, result: Any) -> None: ...

    def refuse(self, rid: RequestId, error: RpcError) -> None: ...

    def client_params(self, method: str, params: Any) -> Any:
        """The params of a request for the client, in this version's form."""
        ...

    def asked(self, method: str, params: Any, rid: RequestId) -> None:
        """A request went to the client as ``rid`` (v2: a session the client holds a
        permission request of ``requires_action``)."""
        ...

    def answered(self, rid: RequestId) -> None:
        """The client answered ``rid`` (a result or an error), before what waited on it
        is told; or the bridge took it back (:meth:`ClientLink.withdraw`)."""
        ...


class ClientLink:
    """The hub's client side (see the module docstring)."""

    def __init__(self, out: list[effects.Effect], threads: Threads) -> None:
        #: The JSON-RPC peer (the shell builds its own error replies with it).
        self.peer = Peer[Outstanding](jsonrpc_member=True)
        self.threads = threads
        self._shown_ids = threads.shown_ids  # the hot path's one lookup
        #: The client's requests received and not answered yet.
        self.open_requests: set[RequestId] = set()
        #: The client's long requests it may cancel (``$/cancel_request``): id → what stops
        #: their work (:meth:`cancellable`).
        self._cancellers: dict[RequestId, Callable[[], None]] = {}
        #: Cancels of requests whose handling waits (for Codex's model catalog): applied
        #: when the handler says what stops its work.
        self._cancel_asked: set[RequestId] = set()
        #: How the client is spoken to: the engine sets a v1 face at once, and the face
        #: ``initialize`` negotiates (see :class:`Face`).
        self.face: Face
        #: The face's :attr:`Face.same` (read for every streamed delta).
        self._same: frozenset[type] = frozenset()
        #: :attr:`_same` without the turn's traffic, which a prompt's insertion may have to
        #: precede (see :meth:`update`): the hot path's one set lookup.
        self._plain: frozenset[type] = frozenset()
        self._out = out

    def speak(self, face: Face) -> None:
        """Speak to the client through ``face`` from now on."""
        self.face = face
        self._same = face.same
        self._plain = face.same - TURN_TRAFFIC

    def request(
        self,
        method: str,
        params: Any,
        on_result: Callable[[Raw], None],
        on_error: OnError,
    ) -> RequestId:
        face = self.face
        params = face.client_params(method, params)
        rid, data = self.peer.request(
            method, params, Outstanding(method, None, on_result, on_error)
        )
        self._out.append(effects.ToClient(data))
        face.asked(method, params, rid)
        return rid

    def notify(self, method: str, params: Any) -> None:
        """Send the client a notification other than ``session/update`` (``$/cancel_request``)."""
        self._out.append(effects.ToClient(self.peer.notification(method, params)))

    def withdraw(self, rid: RequestId) -> None:
        """Take back a request the client holds (``$/cancel_request``): its dialog closes,
        and it waits on the user no more, for the face as for an answer (a v2 session
        ``requires_action`` no longer for it); the client's late answer changes nothing."""
        self.notify("$/cancel_request", acp_permissions.CancelRequestNotification(requestId=rid))
        self.face.answered(rid)

    def update(self, session_id: str, update: msgspec.Struct) -> None:
        """Send one ``session/update`` (any update Struct tagged with ``sessionUpdate``),
        in the face's rendering.

        Only for a session the client is shown: a hidden sub-agent's updates, and
        anything for a thread that is no session (closed, never shown), are dropped. A
        turn's tool call or plan (:data:`~bridge.engine.core.turns.TURN_TRAFFIC`) follows
        the insertion of the prompt whose turn it is: a prompt still awaiting its user
        message item is inserted first, under an id of this bridge's (the client learns
        of its work in order).
        """
        if session_id not in self._shown_ids:
            return
        kind = type(update)
        if kind in self._plain:
            self._out.append(update_effect(session_id, update))
            return
        if kind in TURN_TRAFFIC:
            record = self.threads.session(session_id)
            if record is not None and record.awaiting_message is not None:
                inserted = insert_awaited(self.threads, record, None)
                if inserted is not None:
                    self.state(inserted)
        if kind in self._same:
            self._out.append(update_effect(session_id, update))
            return
        self.face.update(session_id, update)

    def state(self, fact: Fact) -> None:
        """A fact of :mod:`bridge.engine.core.facts`, for the face to tell the client."""
        self.face.state(fact)

    def emit(self, effect: effects.ToClient) -> None:
        """Send ``effect`` as it is: what the face has rendered."""
        self._out.append(effect)

    def answer(self, rid: RequestId, result: Any) -> None:
        if self._answering(rid):
            self.face.answer(rid, result)

    def refuse(self, rid: RequestId, exc: RpcError) -> None:
        if self._answering(rid):
            self.face.refuse(rid, exc)

    def answering(self, rid: RequestId) -> bool:
        """Client request ``rid`` is answered now, by a fact the caller states (a prompt's
        end): ``False`` (logged) when it was answered already, and nothing is to be sent."""
        return self._answering(rid)

    def cancellable(self, rid: RequestId, stop: Callable[[], None]) -> None:
        """Client request ``rid`` may be cancelled (``$/cancel_request``) until it is
        answered: ``stop`` stops its work (what it still asks Codex), and the request is
        answered -32800 at once. A feature whose work can no longer be stopped says so
        with :meth:`not_cancellable`; then the cancel is ignored and the request answered
        as its work ends (ACP lets either answer a cancelled request). Once ``stop`` is
        called the feature answers ``rid`` nothing more: the client may use the id again
        for a new request, which a late answer would take."""
        if rid in self._cancel_asked:
            self._cancel_asked.discard(rid)
            self._cancel(rid, stop)
            return
        self._cancellers[rid] = stop

    def not_cancellable(self, rid: RequestId) -> None:
        self._cancellers.pop(rid, None)

    def cancel_request(self, rid: RequestId) -> None:
        """The client's ``$/cancel_request`` for its request ``rid``."""
        if rid not in self.open_requests:
            log.debug("$/cancel_request for %r: no such request open", rid)
            return
        stop = self._cancellers.pop(rid, None)
        if stop is None:
            # Not handled yet (it waits), or nothing to stop: answered as it ends, unless
            # its handler makes it cancellable.
            self._cancel_asked.add(rid)
            return
        self._cancel(rid, stop)

    def _cancel(self, rid: RequestId, stop: Callable[[], None]) -> None:
        stop()
        self.refuse(rid, RpcError(ErrorCode.REQUEST_CANCELLED, "Request cancelled by the client"))

    def _answering(self, rid: RequestId) -> bool:
        self._cancellers.pop(rid, None)
        self._cancel_asked.discard(rid)
        return answering(self.open_requests, rid, "client")

    def respond(self, rid: RequestId, result: Any) -> None:
        """Send the answer to client request ``rid`` (a face's rendering of it)."""
        self._out.append(effects.ToClient(self.peer.response(rid, result)))

    def respond_error(self, rid: RequestId, exc: RpcError) -> None:
        """Send the error answering client request ``rid`` (a face's rendering of it)."""
        self._out.append(effects.ToClient(self.peer.error(rid, exc.code, exc.message, exc.data)))

    def send_raw(self, data: bytes) -> None:
        """A reply the JSON-RPC peer built itself (to a message that was no valid request)."""
        self._out.append(effects.ToClient(data))
