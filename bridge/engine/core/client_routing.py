"""The client's messages to what handles them: a request to one handler, by method.

A request is handled now (the connection decided it need not wait for Codex:
:mod:`bridge.engine.core.connection`), in these steps:

1. the connection hears of it (past ``initialize``, a v2 client may not repeat it);
2. one handler, by method, from the table of the face the client is spoken to through
   (``hub.client.face.requests``: v1's is the wiring's
   :func:`bridge.engine.routes.v1_requests`, v2's
   :func:`bridge.engine.faces.v2_requests.requests`, each decoding its version's
   params once); a method nobody handles is -32601, and while Codex is away every
   request but ``initialize`` is answered with the reason (v2: known or not);
3. a request that names a sub-agent's session is refused when the sub-agent feature
   says so (the RFD restricts what a sub-agent's session may be asked), before its
   handler runs.

A handler that raises :class:`~bridge.jsonrpc.RpcError` has its request answered
with it. Notifications go to their handler, by method (``session/cancel``);
answers to the bridge's own requests go back to whoever asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeAlias

import msgspec
from msgspec import Raw

from ...jsonrpc import (
    ErrorCode,
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    RequestId,
    RpcError,
)
from . import AGENT_NAME
from .answers import Outstanding
from .connection import Connection
from .hub import Hub, RequestHandler
from .replies import Arrived, Router, take_answer

log = logging.getLogger(__name__)

#: Handles one client notification's raw params.
NotificationHandler: TypeAlias = Callable[[Raw], None]


class SubagentRefusals(Protocol):
    """Refuses requests a sub-agent's session may not take (the sub-agents feature)."""

    def guard(self, method: str, session_id: str) -> None: ...


class CatalogWait(Protocol):
    """Runs what waits for Codex's model catalog (the settings feature)."""

    def when_catalog_ready(self, then: Callable[[], None]) -> None: ...


class ClientRouter(Router):
    """Hands each client message to its handler (see the module docstring)."""

    peer = "client"

    def __init__(
        self,
        hub: Hub,
        notifications: dict[str, NotificationHandler],
        *,
        connection: Connection,
        guard: SubagentRefusals,
        arrived: Arrived,
    ) -> None:
        super().__init__(hub, arrived)
        self.notifications = notifications
        self._connection = connection
        self._guard = guard

    def receive(self, data: bytes) -> bool:
        """One client message, handled; ``True`` when it was a request."""
        hub = self.hub
        msg = hub.client.peer.receive(data)
        if isinstance(msg, IncomingRequest):
            self._arrive(msg.id, hub.client.open_requests)
            try:
                self._request(msg)
            except RpcError as exc:
                hub.client.refuse(msg.id, exc)
            return True
        if isinstance(msg, IncomingNotification):
            handler = self.notifications.get(msg.method)
            if handler is not None:
                handler(msg.params)
            else:
                log.info("ignoring client notification %s", msg.method)
        else:
            if isinstance(msg, (IncomingResponse, IncomingError)):
                hub.client.face.answered(msg.id)
            take_answer(
                msg, on_result=_as_it_is, send_raw=hub.client.send_raw, peer="client", log=log
            )
        return False

    def _request(self, msg: IncomingRequest) -> None:
        method, params = msg.method, msg.params
        self._connection.request(method)
        face = self.hub.client.face
        handler = face.requests.get(method)
        lost = self.hub.codex.lost_reason
        # initialize needs nothing from Codex: a client whose Codex could not start still
        # gets its answer, then the reason on each request that needs Codex (v2: on any
        # request, known or not).
        if (
            lost is not None
            and method != "initialize"
            and (handler is not None or face.version == 2)
        ):
            raise RpcError.internal(lost)
        if handler is None:
            raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")
        self._check(method, params)
        handler(msg.id, params)

    def _check(self, method: str, params: Raw) -> None:
        """Refuse a request that would change a sub-agent's session (the RFD)."""
        if not params:
            return
        try:
            session_id = _SESSION_PEEK.decode(params).sessionId
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return  # the handler reports the bad params
        if session_id:
            self._guard.guard(method, session_id)


def after_catalog(hub: Hub, catalog: CatalogWait, handler: RequestHandler) -> RequestHandler:
    """``handler``, run once the model catalog is in (at once if it is): a request
    that waited is answered by it, or with the error it raised."""

    def deferred(rid: RequestId, raw: Raw) -> None:
        def run() -> None:
            try:
                if hub.codex.lost_reason is not None:
                    raise RpcError.internal(hub.codex.lost_reason)
                handler(rid, raw)
            except RpcError as exc:
                hub.client.refuse(rid, exc)
            except Exception:
                log.exception("internal error handling a deferred request %s", rid)
                if rid in hub.client.open_requests:
                    hub.client.refuse(rid, RpcError.internal(f"{AGENT_NAME} internal error"))

        catalog.when_catalog_ready(run)

    return deferred


def _as_it_is(waiting: Outstanding, result: Raw) -> None:
    """A client's answer goes to its waiter undecoded (a defect there is the guard's)."""
    waiting.on_result(result)


class _SessionPeek(msgspec.Struct):
    sessionId: str = ""


# Decoding one field of params and skipping the rest is cheap enough for every request.
_SESSION_PEEK = msgspec.json.Decoder(_SessionPeek)
