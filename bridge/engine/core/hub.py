"""What every feature shares: the threads, the output to the client, and Codex's side.

The :class:`Hub` is handed to each feature when the engine is wired
(:mod:`bridge.engine.engine`); features use it to find threads
(:attr:`Hub.threads`), to send to the client (:meth:`Hub.update`, :meth:`Hub.state`,
:meth:`Hub.answer_client`, ...), to ask Codex (``hub.codex``: :mod:`.codex_link`) and to
tell the engine what happened (:meth:`Hub.happened`). What the shell fixed at start is
``hub.setup``, what ``initialize`` settled ``hub.handshake`` (:mod:`.hub_parts`). It knows
no feature.

Two promises are kept here, for every feature at once:

- a request to Codex names the type of its result; an answer that does not
  decode into it reaches the caller as an error naming Codex's malformed
  answer (so the client request waiting on it fails cleanly), never as an
  exception;
- every request, from either side, is answered at most once: an answer for a
  request already answered (or never received) is logged and not sent.

Two ways to ask Codex. A request whose answer changes a thread's record (a turn
started, interrupted or steered, a session resumed after Codex came back, a thread
read to place a sub-agent) goes through :meth:`CodexLink.ask <.codex_link.CodexLink.ask>`:
it is a typed entry on the record (:data:`~bridge.engine.core.threads.CodexAsk`) while
Codex has not answered, the answer goes to a method of the feature with the record and
the entry, and it is stale once the entry was withdrawn (its turn ended, its record
forgotten): the entry carries what the answer needs, no closure holds the state. A
request whose answer only answers a client, or feeds a feature's own state, is a step of
an exchange (:mod:`bridge.engine.core.exchanges`, over :meth:`CodexLink.request
<.codex_link.CodexLink.request>`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar

import msgspec
from msgspec import Raw

from ...acp import permissions as acp_permissions
from ...jsonrpc import ErrorCode, Peer, RequestId, RpcError
from . import effects
from .answers import OnError, Outstanding, answering
from .codex_asks import CodexAsk
from .codex_link import CodexLink
from .facts import Fact
from .hub_parts import Handshake, Setup, nothing_stored
from .machines import Machine
from .news import News
from .outbox import update_effect
from .threads import Threads
from .turns import TURN_TRAFFIC, insert_awaited

log = logging.getLogger(__name__)

E = TypeVar("E", bound=CodexAsk)


RequestHandler: TypeAlias = Callable[[RequestId, Raw], None]


class StoredSessionParams(Protocol):
    """What a request that opens a stored session says of it, whichever ACP version
    decoded it (v1's load, resume and fork; v2's resume and fork)."""

    @property
    def sessionId(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def mcpServers(self) -> Sequence[dict[str, Any]] | None: ...

    @property
    def additionalDirectories(self) -> Sequence[str] | None: ...


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
        is told; or the bridge took it back (:meth:`Hub.withdraw_client_request`)."""
        ...


class Hub:
    """The engine's shared state and output (see the module docstring).

    ``thread_config`` is sent as ``config`` in every ``thread/start`` (the
    ``-c key=value`` overrides, for a Codex the bridge did not start itself) while no
    profile is in force; ``profiles`` is the ``config`` to send instead with each
    profile in force (by name: the profile layered, the overrides over it), and
    ``profile`` the one in force at first (``None``: none).
    ``api_key`` is an OpenAI API key from the bridge's environment, for the
    ``authenticate`` method that hands it to Codex (the engine reads no
    environment itself). ``is_directory`` answers whether a path is an
    existing directory: the shell passes the file system's answer in, the
    replay the recorded one. ``real_path`` is a path with its symlinks resolved, as the
    shell's file system has them (the path itself where it has none to resolve), or as
    recorded.
    """

    def __init__(
        self,
        *,
        thread_config: dict[str, Any] | None,
        api_key: str | None,
        profiles: Mapping[str, dict[str, Any]] | None = None,
        profile: str | None = None,
        is_directory: Callable[[str], bool],
        real_path: Callable[[str], str] = str,
        paged_store: bool = False,
        codex_shared: bool = False,
        stored_machine: Callable[[str], str | None] | None = None,
    ) -> None:
        #: The effects produced since the last :meth:`take`, both sides', in order.
        self._out: list[effects.Effect] = []
        self.client = Peer[Outstanding](jsonrpc_member=True)
        self.threads = Threads()
        self._shown_ids = self.threads.shown_ids  # the hot path's one lookup
        #: What the shell fixed at start: never written (see :mod:`.hub_parts`).
        self.setup = Setup(
            base_config=thread_config or None,
            profiles=dict(profiles or {}),
            api_key=api_key or None,
            is_directory=is_directory,
            real_path=real_path,
            paged_store=paged_store,
            codex_shared=codex_shared,
            stored_machine=stored_machine or nothing_stored,
        )
        #: What the client's ``initialize`` settled: core/connection.py writes it.
        self.handshake = Handshake()
        #: Codex's side: what goes to Codex and comes back, and its connection's state.
        self.codex = CodexLink(self._out)
        #: The profile new threads get (the ``profile`` option's), ``None``: none. The
        #: settings feature's to change.
        self.profile = profile if profile in self.setup.profiles else None
        #: The client's requests received and not answered yet.
        self.open_client_requests: set[RequestId] = set()
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
        #: The machines a session may act on, by name (the machines feature's; empty:
        #: none named, and no ``machine`` option is offered).
        self.machines: dict[str, Machine] = {}
        #: What the features said happened, for the engine to follow (:mod:`.news`): one
        #: list for the connection's life (the engine tests it for every Codex message).
        self.news: list[News] = []

    @property
    def thread_config(self) -> dict[str, Any] | None:
        """The ``config`` of the threads started or opened now: the profile's, else the
        overrides (``None``: nothing to send)."""
        if self.profile is not None:
            return self.setup.profiles[self.profile] or None
        return self.setup.base_config

    def declares(self, capability: str) -> bool:
        """The client declared AIR's ``capability`` at ``initialize``."""
        air = self.handshake.air
        return air is not None and capability in air

    def speak(self, face: Face) -> None:
        """Speak to the client through ``face`` from now on."""
        self.face = face
        self._same = face.same
        self._plain = face.same - TURN_TRAFFIC

    @property
    def subagents_exposed(self) -> bool:
        """The client declared ``subagents``: sub-agents are shown as sessions."""
        return self.handshake.client_capabilities.subagents is not None

    @property
    def speaks_unstable(self) -> bool:
        """The client speaks ACP's unstable schema, so the agent capabilities only that
        schema has (``providers``, ``sessionCapabilities.fork``) are advertised to it.

        A client says nothing of which schema it was written to; the sign is a client
        capability only the unstable schema has, the one the bridge reads:
        ``subagents``. Every v2 client counts (v2 clients take sub-agents without
        declaring them). A client that is not told may still call the methods.
        """
        return self.subagents_exposed

    def effect(
        self, asked: effects.MachineWanted | effects.MachineChosen | effects.MachineReleased
    ) -> None:
        """Ask the shell to reach a machine, to store the one a thread was given, or to
        remove a session's own place."""
        self._out.append(asked)

    # -- to the client ----------------------------------------------------------------

    def client_request(
        self,
        method: str,
        params: Any,
        on_result: Callable[[Raw], None],
        on_error: OnError,
    ) -> RequestId:
        face = self.face
        params = face.client_params(method, params)
        rid, data = self.client.request(
            method, params, Outstanding(method, None, on_result, on_error)
        )
        self._out.append(effects.ToClient(data))
        face.asked(method, params, rid)
        return rid

    def client_notification(self, method: str, params: Any) -> None:
        """Send the client a notification other than ``session/update`` (``$/cancel_request``)."""
        self._out.append(effects.ToClient(self.client.notification(method, params)))

    def withdraw_client_request(self, rid: RequestId) -> None:
        """Take back a request the client holds (``$/cancel_request``): its dialog closes,
        and it waits on the user no more, for the face as for an answer (a v2 session
        ``requires_action`` no longer for it); the client's late answer changes nothing."""
        self.client_notification(
            "$/cancel_request", acp_permissions.CancelRequestNotification(requestId=rid)
        )
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

    def answer_client(self, rid: RequestId, result: Any) -> None:
        if self._answering_client(rid):
            self.face.answer(rid, result)

    def refuse_client(self, rid: RequestId, exc: RpcError) -> None:
        if self._answering_client(rid):
            self.face.refuse(rid, exc)

    def answering_client(self, rid: RequestId) -> bool:
        """Client request ``rid`` is answered now, by a fact the caller states (a prompt's
        end): ``False`` (logged) when it was answered already, and nothing is to be sent."""
        return self._answering_client(rid)

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

    def cancel_client_request(self, rid: RequestId) -> None:
        """The client's ``$/cancel_request`` for its request ``rid``."""
        if rid not in self.open_client_requests:
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
        self.refuse_client(
            rid, RpcError(ErrorCode.REQUEST_CANCELLED, "Request cancelled by the client")
        )

    def _answering_client(self, rid: RequestId) -> bool:
        self._cancellers.pop(rid, None)
        self._cancel_asked.discard(rid)
        return answering(self.open_client_requests, rid, "client")

    def respond(self, rid: RequestId, result: Any) -> None:
        """Send the answer to client request ``rid`` (a face's rendering of it)."""
        self._out.append(effects.ToClient(self.client.response(rid, result)))

    def respond_error(self, rid: RequestId, exc: RpcError) -> None:
        """Send the error answering client request ``rid`` (a face's rendering of it)."""
        self._out.append(effects.ToClient(self.client.error(rid, exc.code, exc.message, exc.data)))

    def send_raw_to_client(self, data: bytes) -> None:
        """A reply the JSON-RPC peer built itself (to a message that was no valid request)."""
        self._out.append(effects.ToClient(data))

    # -- bookkeeping ------------------------------------------------------------------

    def happened(self, news: News) -> None:
        """Tell the engine what happened (:mod:`bridge.engine.core.news`): it decides what
        follows, once the feature saying it returns."""
        self.news.append(news)

    def take_news(self) -> list[News]:
        """What the features said happened since the last call, in order (the engine's)."""
        taken = self.news[:]
        self.news.clear()
        return taken

    def take(self) -> list[effects.Effect]:
        """The effects produced since the last call, in order."""
        out = self._out[:]
        self._out.clear()
        return out
