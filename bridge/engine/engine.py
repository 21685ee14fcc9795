"""The bridge's state machine: ACP and Codex messages in, messages out.

Rules this engine keeps (read these before changing it):

1. It does no I/O and keeps no clock. Every input is a complete JSON-RPC
   message (bytes) from one side, or an event the shell observed (Codex is
   gone); every output is an :class:`~bridge.engine.effects.Effect` naming the
   side to send bytes to. The live daemon and the replay tests run this same
   code, so what a recording shows is what a user saw.
2. Nothing from the client reaches Codex before Codex has finished its
   ``initialize`` handshake: client messages that arrive earlier wait, in
   order, and are handled once Codex is ready (or answered with an error if
   Codex never becomes ready).
3. Every client request is answered exactly once. A request that waits on
   Codex is answered when Codex answers, or with an error when Codex is lost.
   Every Codex request is answered exactly once too, never left waiting.
4. A prompt resolves when Codex says the turn ended (``turn/completed``), never
   when a request was merely acknowledged: ``session/cancel`` sends
   ``turn/interrupt``, and the prompt becomes ``cancelled`` only once Codex
   reports the turn ``interrupted``.
5. Bad input is answered with a typed JSON-RPC error (-32700, -32600, -32601,
   -32602, or not-found) and changes nothing else; the connection goes on.

Structure: :class:`Engine` is a hub. It owns the two JSON-RPC peers, the
sessions, and the output; *features* (``prompts.py``, ...) register the
methods they handle with :meth:`Engine.on_client_request`,
:meth:`Engine.on_codex_notification` and friends, and use the hub's output
helpers (:meth:`Engine.update`, :meth:`Engine.codex_request`, ...). Several
features may listen to the same notification; they run in registration
order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import msgspec
from msgspec import Raw

from .. import __version__
from ..acp import types as acp
from ..codex import types as codex
from ..jsonrpc import (
    ErrorCode,
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    Peer,
    RequestId,
    RpcError,
)
from ..jsonrpc.peer import ErrorObject
from .effects import Effect, ToClient, ToCodex
from .sessions import Session

log = logging.getLogger(__name__)

T = TypeVar("T")

OnResult: TypeAlias = Callable[[Raw], None]
OnError: TypeAlias = Callable[[ErrorObject], None]
RequestHandler: TypeAlias = Callable[[RequestId, Raw], None]
NotificationHandler: TypeAlias = Callable[[Raw], None]

AGENT_NAME = "codex-acp-bridge"


@dataclass(frozen=True, slots=True)
class Waiting:
    """What to do when the other side answers one of our requests."""

    on_result: OnResult
    on_error: OnError


class Engine:
    """Translate between one ACP client and one Codex app-server connection.

    Call :meth:`start` once, then feed every message with
    :meth:`receive_client` / :meth:`receive_codex`, and report a lost Codex
    with :meth:`codex_lost`. Each call returns the effects to carry out, in
    order.

    ``thread_config`` is sent as ``config`` in every ``thread/start`` (the
    ``-c key=value`` overrides, for a Codex the bridge did not start itself).
    ``api_key`` is an OpenAI API key from the bridge's environment, for the
    ``authenticate`` method that hands it to Codex (the engine reads no
    environment itself).
    """

    def __init__(
        self, *, thread_config: dict[str, Any] | None = None, api_key: str | None = None
    ) -> None:
        self.client = Peer[Waiting](jsonrpc_member=True)
        self.codex = Peer[Waiting](jsonrpc_member=False)
        self.sessions: dict[str, Session] = {}
        self.client_capabilities = acp.ClientCapabilities()
        self.codex_ready = False
        self.codex_lost_reason: str | None = None
        self.thread_config = thread_config or None
        self.api_key = api_key or None
        self._before_ready: list[bytes] = []
        #: Sessions whose updates the client must not see (see :meth:`update`).
        self.hidden: set[str] = set()
        self._out: list[Effect] = []
        self._client_requests: dict[str, RequestHandler] = {"initialize": self._initialize}
        self._client_notifications: dict[str, list[NotificationHandler]] = {}
        self._codex_notifications: dict[str, list[NotificationHandler]] = {}
        self._codex_requests: dict[str, RequestHandler] = {}
        #: Called with the ``initialize`` result before it is sent: features add what they offer.
        self.initialize_hooks: list[Callable[[acp.InitializeResult], None]] = []
        #: Called when Codex is lost, after pending requests failed.
        self.lost_hooks: list[Callable[[str], None]] = []
        #: Called when the client has gone (its stdin closed): answer what Codex waits on.
        self.client_lost_hooks: list[Callable[[], None]] = []
        #: Called with a ``session/new`` request's params and the ``thread/start``
        #: params about to be sent: features add what the session asks for (MCP
        #: servers, a mode the user picked).
        self.thread_start_hooks: list[
            Callable[[acp.NewSessionParams, codex.ThreadStartParams], None]
        ] = []
        #: Called when a session opens (new, load, resume, fork), with the result
        #: about to be sent and Codex's thread: features add modes, config options.
        self.session_opened_hooks: list[
            Callable[[Session, Any, codex.ThreadStartResult], None]
        ] = []
        #: Called right after a session's open result was sent (new, load, resume,
        #: fork): for updates that may only follow the announcement (the commands).
        self.session_announced_hooks: list[Callable[[Session], None]] = []
        #: Called when a session closes (``session/close``).
        self.session_closed_hooks: list[Callable[[Session], None]] = []
        #: Called with each ``turn/start`` about to be sent: the settings the user
        #: picked (mode, model, effort) go here, not into Codex's config file.
        self.turn_start_hooks: list[Callable[[Session, codex.TurnStartParams], None]] = []
        #: Asked, in order, whether a prompt is a command (``/review``, ``/compact``);
        #: the first that returns ``(method, params)`` has the prompt start that
        #: Codex request instead of ``turn/start`` (its result names the turn, or
        #: the ``turn/started`` that follows it does).
        self.prompt_command_hooks: list[
            Callable[[Session, list[codex.UserInput]], tuple[str, Any] | None]
        ] = []

        #: Checks run before a client request reaches its handler: ``guard(method,
        #: session_id)`` raises ``RpcError`` to refuse it (sub-agent sessions are restricted).
        self.request_guards: list[Callable[[str, str], None]] = []
        #: Sees Codex traffic for a thread no session shows yet: returns True when
        #: it keeps the message (held until the thread's parentage is known).
        self.thread_gate: Callable[[str, bytes], bool] | None = None
        #: Called when a session is added (``add_session``).
        self.session_added_hooks: list[Callable[[Session], None]] = []

        # The features; each registers the methods it handles, in this order.
        from .approvals import Approvals
        from .config import Configuration
        from .lifecycle import Lifecycle
        from .prompts import Prompts
        from .tools import Tools

        self.prompts = Prompts(self)
        self.tools = Tools(self)
        self.approvals = Approvals(self)
        self.lifecycle = Lifecycle(self)
        self.configuration = Configuration(self)
        from .subagents import Subagents

        self.subagents = Subagents(self)

    # -- registration (used by features) ---------------------------------------------

    def on_client_request(self, method: str, handler: RequestHandler) -> None:
        assert method not in self._client_requests, f"two handlers for {method}"
        self._client_requests[method] = handler

    def on_client_notification(self, method: str, handler: NotificationHandler) -> None:
        self._client_notifications.setdefault(method, []).append(handler)

    def on_codex_notification(self, method: str, handler: NotificationHandler) -> None:
        self._codex_notifications.setdefault(method, []).append(handler)

    def on_codex_request(self, method: str, handler: RequestHandler) -> None:
        assert method not in self._codex_requests, f"two handlers for {method}"
        self._codex_requests[method] = handler

    @property
    def codex_notification_methods(self) -> frozenset[str]:
        return frozenset(self._codex_notifications)

    @property
    def starting(self) -> bool:
        """Codex has neither finished its handshake nor been lost yet."""
        return not self.codex_ready and self.codex_lost_reason is None

    # -- inputs ------------------------------------------------------------------------

    def start(self) -> list[Effect]:
        """Begin the Codex handshake."""
        params = codex.InitializeParams(
            clientInfo=codex.ClientInfo(name=AGENT_NAME, version=__version__),
            capabilities=codex.InitializeCapabilities(experimentalApi=True),
        )
        self.codex_request("initialize", params, self._codex_initialized, self._codex_init_failed)
        return self._take()

    def receive_client(self, data: bytes) -> list[Effect]:
        """One message from the ACP client."""
        if self.starting:
            self._before_ready.append(data)
            return []
        self._handle_client(data)
        return self._take()

    def receive_codex(self, data: bytes) -> list[Effect]:
        """One message from Codex's app-server."""
        msg = self.codex.receive(data)
        if (
            self.thread_gate is not None
            and isinstance(msg, IncomingNotification | IncomingRequest)
            and msg.params
        ):
            try:
                thread_id = _THREAD_PEEK.decode(msg.params).threadId
            except msgspec.ValidationError:
                thread_id = ""  # params that are no object: the handler will say so
            if thread_id and thread_id not in self.sessions and self.thread_gate(thread_id, data):
                return self._take()
        self.dispatch_codex(msg)
        return self._take()

    def refeed_codex(self, data: bytes) -> None:
        """Handle a message the thread gate held earlier, as if it arrived now."""
        self.dispatch_codex(self.codex.receive(data))

    def dispatch_codex(self, msg: Any) -> None:
        if isinstance(msg, IncomingNotification):
            handlers = self._codex_notifications.get(msg.method)
            if handlers is None:
                log.debug("ignoring Codex notification %s", msg.method)
            else:
                for handler in handlers:
                    try:
                        handler(msg.params)
                    except msgspec.ValidationError as exc:
                        # Codex sent a shape this bridge does not understand: say
                        # so loudly, keep the connection (the next may be fine).
                        log.warning("Codex %s not understood: %s", msg.method, exc)
        elif isinstance(msg, IncomingResponse):
            msg.context.on_result(msg.result)
        elif isinstance(msg, IncomingError):
            msg.context.on_error(msg.error)
        elif isinstance(msg, IncomingRequest):
            self._handle_codex_request(msg)
        else:
            log.warning("Codex sent an invalid message: %s", msg.reason)

    def client_lost(self) -> list[Effect]:
        """The client is gone: answer every Codex request still waiting on it."""
        for hook in self.client_lost_hooks:
            hook()
        return self._take()

    def codex_lost(self, reason: str) -> list[Effect]:
        """Codex is gone (process exited, socket closed): fail what waited on it."""
        if self.codex_lost_reason is not None:
            return []
        self.codex_lost_reason = reason
        self.codex_ready = False
        for _rid, waiting in self.codex.abandon_pending():
            waiting.on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, reason))
        for hook in self.lost_hooks:
            hook(reason)
        self._drain_before_ready()
        return self._take()

    # -- dispatch ------------------------------------------------------------------------

    def _handle_client(self, data: bytes) -> None:
        msg = self.client.receive(data)
        if isinstance(msg, IncomingRequest):
            handler = self._client_requests.get(msg.method)
            try:
                if handler is None:
                    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
                if self.codex_lost_reason is not None:
                    raise RpcError.internal(self.codex_lost_reason)
                if self.request_guards and msg.params:
                    try:
                        session_id = _SESSION_PEEK.decode(msg.params).sessionId
                    except msgspec.ValidationError:
                        session_id = ""  # the handler reports the bad params
                    if session_id:
                        for guard in self.request_guards:
                            guard(msg.method, session_id)
                handler(msg.id, msg.params)
            except RpcError as exc:
                self.client_error(msg.id, exc)
        elif isinstance(msg, IncomingNotification):
            handlers = self._client_notifications.get(msg.method)
            if handlers is None:
                log.info("ignoring client notification %s", msg.method)
                return
            for note in handlers:
                try:
                    note(msg.params)
                except RpcError as exc:
                    log.warning("bad %s notification: %s", msg.method, exc.message)
        elif isinstance(msg, IncomingResponse):
            msg.context.on_result(msg.result)
        elif isinstance(msg, IncomingError):
            msg.context.on_error(msg.error)
        else:
            log.warning("client sent an invalid message: %s", msg.reason)
            if msg.reply is not None:
                self._out.append(ToClient(msg.reply))

    def _handle_codex_request(self, msg: IncomingRequest) -> None:
        handler = self._codex_requests.get(msg.method)
        if handler is None:
            # Never leave Codex waiting on a request nobody will see.
            log.warning("Codex request %s is not supported; declining", msg.method)
            self.codex_error_reply(
                msg.id, ErrorCode.METHOD_NOT_FOUND, f"{AGENT_NAME} does not support {msg.method}"
            )
            return
        try:
            handler(msg.id, msg.params)
        except RpcError as exc:
            self.codex_error_reply(msg.id, exc.code, exc.message)
        except msgspec.ValidationError as exc:
            log.warning("Codex %s not understood: %s", msg.method, exc)
            self.codex_error_reply(msg.id, ErrorCode.INVALID_PARAMS, f"not understood: {exc}")

    def _initialize(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp.InitializeParams, "initialize")
        self.client_capabilities = params.clientCapabilities
        result = acp.InitializeResult(
            protocolVersion=acp.PROTOCOL_VERSION,
            agentCapabilities=acp.AgentCapabilities(
                promptCapabilities=acp.PromptCapabilities(image=True, embeddedContext=True),
            ),
            agentInfo=acp.Implementation(name=AGENT_NAME, title="Codex", version=__version__),
        )
        for hook in self.initialize_hooks:
            hook(result)
        self.client_result(rid, result)

    # -- codex handshake --------------------------------------------------------------------

    def _codex_initialized(self, _result: Raw) -> None:
        self.codex_ready = True
        self._out.append(ToCodex(self.codex.notification("initialized")))
        self._drain_before_ready()

    def _codex_init_failed(self, error: ErrorObject) -> None:
        if self.codex_lost_reason is None:  # else: lost, and the reason says how
            self.codex_lost_reason = f"Codex app-server refused initialize: {error.message}"
        self._drain_before_ready()

    def _drain_before_ready(self) -> None:
        waiting, self._before_ready = self._before_ready, []
        for data in waiting:
            self._handle_client(data)

    # -- output (used by features) ------------------------------------------------------------

    def add_session(self, session: Session) -> None:
        """Make a session known (new, loaded, or a sub-agent's) and tell the features."""
        self.sessions[session.session_id] = session
        if not session.visible:
            self.hidden.add(session.session_id)
        for hook in self.session_added_hooks:
            hook(session)

    def session(self, session_id: str) -> Session:
        """The session with this id, or a not-found error for the client."""
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.not_found(f"Session not found: {session_id}", {"sessionId": session_id})
        return session

    def codex_request(
        self, method: str, params: Any, on_result: OnResult, on_error: OnError
    ) -> None:
        if self.codex_lost_reason is not None:
            on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, self.codex_lost_reason))
            return
        _rid, data = self.codex.request(method, params, Waiting(on_result, on_error))
        self._out.append(ToCodex(data))

    def codex_result(self, rid: RequestId, result: Any) -> None:
        """Answer a request Codex made."""
        self._out.append(ToCodex(self.codex.response(rid, result)))

    def codex_error_reply(self, rid: RequestId, code: int, message: str) -> None:
        self._out.append(ToCodex(self.codex.error(rid, code, message)))

    def client_request(
        self, method: str, params: Any, on_result: OnResult, on_error: OnError
    ) -> RequestId:
        rid, data = self.client.request(method, params, Waiting(on_result, on_error))
        self._out.append(ToClient(data))
        return rid

    def client_notification(self, method: str, params: Any) -> None:
        """Send the client a notification other than ``session/update`` (``$/cancel_request``)."""
        self._out.append(ToClient(self.client.notification(method, params)))

    def update(self, session_id: str, update: msgspec.Struct) -> None:
        """Send one ``session/update`` (any update Struct tagged with ``sessionUpdate``).

        Updates for a session the client is not shown (a sub-agent of a client
        that did not declare ``subagents``) are not sent.
        """
        if session_id in self.hidden:
            return
        params = acp.SessionNotification(sessionId=session_id, update=update)
        self._out.append(ToClient(self.client.notification("session/update", params)))

    def client_result(self, rid: RequestId, result: Any) -> None:
        self._out.append(ToClient(self.client.response(rid, result)))

    def client_error(self, rid: RequestId, exc: RpcError) -> None:
        self._out.append(ToClient(self.client.error(rid, exc.code, exc.message, exc.data)))

    def forward_error(self, rid: RequestId) -> OnError:
        """An ``on_error`` that passes Codex's error on to client request ``rid``."""

        def forward(error: ErrorObject) -> None:
            self.client_error(rid, codex_error(error))

        return forward

    def _take(self) -> list[Effect]:
        out, self._out = self._out, []
        return out


class _ThreadPeek(msgspec.Struct):
    threadId: str = ""


class _SessionPeek(msgspec.Struct):
    sessionId: str = ""


# Decoding one field of params and skipping the rest is cheap enough for every message.
_THREAD_PEEK = msgspec.json.Decoder(_ThreadPeek)
_SESSION_PEEK = msgspec.json.Decoder(_SessionPeek)


def decode_params(raw: Raw, kind: type[T], method: str) -> T:
    """Decode request params; a mismatch is -32602 naming the field."""
    try:
        return msgspec.json.decode(raw or b"null", type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        detail = str(exc).replace("`$`", "`params`").replace("`$.", "`params.")
        raise RpcError.invalid_params(f"Invalid params for {method}: {detail}") from None


def codex_error(error: ErrorObject) -> RpcError:
    """A Codex JSON-RPC error, passed on with Codex's own message."""
    return RpcError(ErrorCode.INTERNAL_ERROR, f"Codex: {error.message}", error.data)
