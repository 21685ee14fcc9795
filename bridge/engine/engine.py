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
4. A prompt resolves when Codex says the turn ended (``turn/completed``), never
   when a request was merely acknowledged: ``session/cancel`` sends
   ``turn/interrupt``, and the prompt becomes ``cancelled`` only once Codex
   reports the turn ``interrupted``.
5. Bad input is answered with a typed JSON-RPC error (-32700, -32600, -32601,
   -32602, or not-found) and changes nothing else; the connection goes on.
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
    Invalid,
    Peer,
    RequestId,
    RpcError,
)
from ..jsonrpc.peer import ErrorObject
from . import translate
from .effects import Effect, ToClient, ToCodex
from .prompt import prompt_to_input
from .sessions import Prompt, Session

log = logging.getLogger(__name__)

T = TypeVar("T")

OnResult: TypeAlias = Callable[[Raw], None]
OnError: TypeAlias = Callable[[ErrorObject], None]


@dataclass(frozen=True, slots=True)
class _Waiting:
    """What to do when Codex answers one of our requests."""

    on_result: OnResult
    on_error: OnError


AGENT_NAME = "codex-acp-bridge"


class Engine:
    """Translate between one ACP client and one Codex app-server connection.

    Call :meth:`start` once, then feed every message with
    :meth:`receive_client` / :meth:`receive_codex`, and report a lost Codex
    with :meth:`codex_lost`. Each call returns the effects to carry out, in
    order.

    ``thread_config`` is sent as ``config`` in every ``thread/start`` (the
    ``-c key=value`` overrides, for a Codex the bridge did not start itself).
    """

    def __init__(self, *, thread_config: dict[str, Any] | None = None) -> None:
        self.client = Peer[None](jsonrpc_member=True)
        self.codex = Peer[_Waiting](jsonrpc_member=False)
        self.sessions: dict[str, Session] = {}
        self.client_capabilities = acp.ClientCapabilities()
        self.codex_ready = False
        self.codex_lost_reason: str | None = None
        self.thread_config = thread_config or None
        self._before_ready: list[bytes] = []
        self._out: list[Effect] = []
        self._codex_notifications: dict[str, Callable[[Raw], None]] = {
            "item/agentMessage/delta": self._on_agent_message_delta,
            "item/reasoning/summaryTextDelta": self._on_reasoning_delta,
            "item/reasoning/summaryPartAdded": self._on_reasoning_part_added,
            "item/completed": self._on_item_completed,
            "turn/started": self._on_turn_started,
            "turn/completed": self._on_turn_completed,
            "thread/tokenUsage/updated": self._on_token_usage,
            "error": self._on_error,
        }
        self._client_requests: dict[str, Callable[[RequestId, Raw], None]] = {
            "initialize": self._initialize,
            "session/new": self._session_new,
            "session/prompt": self._session_prompt,
        }
        self._client_notifications: dict[str, Callable[[Raw], None]] = {
            "session/cancel": self._session_cancel,
        }

    @property
    def starting(self) -> bool:
        """Codex has neither finished its handshake nor been lost yet."""
        return not self.codex_ready and self.codex_lost_reason is None

    # -- inputs ------------------------------------------------------------------

    def start(self) -> list[Effect]:
        """Begin the Codex handshake."""
        params = codex.InitializeParams(
            clientInfo=codex.ClientInfo(name=AGENT_NAME, version=__version__),
            capabilities=codex.InitializeCapabilities(experimentalApi=True),
        )
        self._codex_request("initialize", params, self._codex_initialized, self._codex_init_failed)
        return self._take()

    def receive_client(self, data: bytes) -> list[Effect]:
        """One message from the ACP client."""
        if not self.codex_ready and self.codex_lost_reason is None:
            self._before_ready.append(data)
            return []
        self._handle_client(data)
        return self._take()

    def receive_codex(self, data: bytes) -> list[Effect]:
        """One message from Codex's app-server."""
        msg = self.codex.receive(data)
        if isinstance(msg, IncomingNotification):
            handler = self._codex_notifications.get(msg.method)
            if handler is None:
                log.debug("ignoring Codex notification %s", msg.method)
            else:
                try:
                    handler(msg.params)
                except msgspec.ValidationError as exc:
                    # Codex sent a shape this bridge does not understand: say so
                    # loudly, keep the connection (the next message may be fine).
                    log.warning("Codex %s not understood: %s", msg.method, exc)
        elif isinstance(msg, IncomingResponse):
            msg.context.on_result(msg.result)
        elif isinstance(msg, IncomingError):
            msg.context.on_error(msg.error)
        elif isinstance(msg, IncomingRequest):
            # Approvals and questions are not bridged yet: answer at once so
            # that Codex never waits on a request nobody will see.
            log.warning("Codex request %s not supported yet; declining", msg.method)
            self._out.append(
                ToCodex(
                    self.codex.error(
                        msg.id,
                        ErrorCode.METHOD_NOT_FOUND,
                        f"{AGENT_NAME} does not support {msg.method} yet",
                    )
                )
            )
        else:
            log.warning("Codex sent an invalid message: %s", msg.reason)
        return self._take()

    def codex_lost(self, reason: str) -> list[Effect]:
        """Codex is gone (process exited, socket closed): fail what waited on it."""
        if self.codex_lost_reason is not None:
            return []
        self.codex_lost_reason = reason
        self.codex_ready = False
        for _rid, waiting in self.codex.abandon_pending():
            waiting.on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, reason))
        for session in self.sessions.values():
            if session.prompt is not None:
                self._fail_prompt(session, reason)
        self._drain_before_ready()
        return self._take()

    # -- client side ---------------------------------------------------------------

    def _handle_client(self, data: bytes) -> None:
        msg = self.client.receive(data)
        if isinstance(msg, IncomingRequest):
            handler = self._client_requests.get(msg.method)
            try:
                if handler is None:
                    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
                if self.codex_lost_reason is not None:
                    raise RpcError.internal(self.codex_lost_reason)
                handler(msg.id, msg.params)
            except RpcError as exc:
                self._client_error(msg.id, exc)
        elif isinstance(msg, IncomingNotification):
            note = self._client_notifications.get(msg.method)
            if note is None:
                log.info("ignoring client notification %s", msg.method)
                return
            try:
                note(msg.params)
            except RpcError as exc:
                log.warning("bad %s notification: %s", msg.method, exc.message)
        elif isinstance(msg, Invalid):
            log.warning("client sent an invalid message: %s", msg.reason)
            if msg.reply is not None:
                self._out.append(ToClient(msg.reply))
        else:
            # Responses: the bridge sends the client no requests yet.
            log.warning("unexpected response from client: %r", msg)

    def _initialize(self, rid: RequestId, raw: Raw) -> None:
        params = _decode(raw, acp.InitializeParams, "initialize")
        self.client_capabilities = params.clientCapabilities
        result = acp.InitializeResult(
            protocolVersion=acp.PROTOCOL_VERSION,
            agentCapabilities=acp.AgentCapabilities(
                promptCapabilities=acp.PromptCapabilities(image=True, embeddedContext=True),
            ),
            agentInfo=acp.Implementation(name=AGENT_NAME, title="Codex", version=__version__),
        )
        self._client_result(rid, result)

    def _session_new(self, rid: RequestId, raw: Raw) -> None:
        params = _decode(raw, acp.NewSessionParams, "session/new")
        if not params.cwd.startswith("/"):
            raise RpcError.invalid_params(
                f"session/new: cwd must be an absolute path, got {params.cwd!r}"
            )
        start = codex.ThreadStartParams(cwd=params.cwd)
        if self.thread_config:
            start.config = self.thread_config

        def started(result: Raw) -> None:
            thread = msgspec.json.decode(result, type=codex.ThreadStartResult).thread
            self.sessions[thread.id] = Session(session_id=thread.id, cwd=params.cwd)
            self._client_result(rid, acp.NewSessionResult(sessionId=thread.id))

        self._codex_request("thread/start", start, started, self._forward_error(rid))

    def _session_prompt(self, rid: RequestId, raw: Raw) -> None:
        params = _decode(raw, acp.PromptParams, "session/prompt")
        session = self._session(params.sessionId)
        if session.prompt is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session.session_id} already has a prompt in progress",
            )
        inputs = prompt_to_input(params.prompt)
        prompt = session.prompt = Prompt(request_id=rid)

        def turn_started(result: Raw) -> None:
            turn = msgspec.json.decode(result, type=codex.TurnStartResult).turn
            self._turn_known(session, prompt, turn.id)

        def turn_refused(error: ErrorObject) -> None:
            if session.prompt is prompt:
                session.prompt = None
                self._client_error(rid, _codex_error(error))

        self._codex_request(
            "turn/start",
            codex.TurnStartParams(threadId=session.thread_id, input=inputs),
            turn_started,
            turn_refused,
        )

    def _session_cancel(self, raw: Raw) -> None:
        params = _decode(raw, acp.CancelParams, "session/cancel")
        session = self.sessions.get(params.sessionId)
        if session is None:
            log.warning("session/cancel for unknown session %s", params.sessionId)
            return
        prompt = session.prompt
        if prompt is None or prompt.cancel_requested:
            return
        prompt.cancel_requested = True
        self._send_interrupt(session, prompt)

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.not_found(f"Session not found: {session_id}", {"sessionId": session_id})
        return session

    # -- prompts and turns ------------------------------------------------------------

    def _turn_known(self, session: Session, prompt: Prompt, turn_id: str) -> None:
        if session.prompt is not prompt or prompt.turn_id is not None:
            return
        prompt.turn_id = turn_id
        if prompt.cancel_requested:
            self._send_interrupt(session, prompt)

    def _send_interrupt(self, session: Session, prompt: Prompt) -> None:
        # Without a turn id there is nothing to interrupt yet; _turn_known sends
        # it as soon as Codex names the turn.
        if prompt.turn_id is None or prompt.interrupt_sent:
            return
        prompt.interrupt_sent = True

        def refused(error: ErrorObject) -> None:
            # The turn may have ended just before the interrupt arrived; its
            # turn/completed settles the prompt either way.
            log.info("turn/interrupt refused: %s", error.message)

        self._codex_request(
            "turn/interrupt",
            codex.TurnInterruptParams(threadId=session.thread_id, turnId=prompt.turn_id),
            lambda _result: None,
            refused,
        )

    def _on_turn_started(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.TurnNotification)
        session = self.sessions.get(note.threadId)
        if session is not None and session.prompt is not None:
            self._turn_known(session, session.prompt, note.turn.id)

    def _on_turn_completed(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.TurnNotification)
        session = self.sessions.get(note.threadId)
        if session is None:
            return
        session.streamed_items.clear()
        prompt = session.prompt
        if prompt is None or (prompt.turn_id is not None and prompt.turn_id != note.turn.id):
            return
        session.prompt = None
        status = note.turn.status
        if status == "completed":
            self._client_result(prompt.request_id, acp.PromptResult(stopReason="end_turn"))
        elif status == "interrupted" or (status == "failed" and prompt.cancel_requested):
            # A failure caused by the user's cancel is still a cancel (ACP).
            self._client_result(prompt.request_id, acp.PromptResult(stopReason="cancelled"))
        else:
            error = note.turn.error
            message = (error.message if error else None) or prompt.error_message
            data: dict[str, Any] = {"turnId": note.turn.id, "status": status}
            if error is not None and error.codexErrorInfo is not None:
                data["codexErrorInfo"] = error.codexErrorInfo
            if error is not None and error.additionalDetails:
                data["additionalDetails"] = error.additionalDetails
            self._client_error(
                prompt.request_id,
                RpcError.internal(message or f"Codex turn ended with status {status}", data),
            )

    def _fail_prompt(self, session: Session, reason: str) -> None:
        prompt = session.prompt
        if prompt is None:
            return
        session.prompt = None
        self._client_error(prompt.request_id, RpcError.internal(reason))

    def _on_error(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ErrorNotification)
        session = self.sessions.get(note.threadId)
        if session is None or session.prompt is None:
            return
        if not note.willRetry:
            session.prompt.error_message = note.error.message

    # -- streamed content ----------------------------------------------------------------

    def _on_agent_message_delta(self, raw: Raw) -> None:
        delta = _AGENT_DELTA.decode(raw)
        session = self.sessions.get(delta.threadId)
        if session is None:
            return
        session.streamed_items.add(delta.itemId)
        self._update(session.session_id, translate.message_chunk(delta))

    def _on_reasoning_delta(self, raw: Raw) -> None:
        delta = _REASONING_DELTA.decode(raw)
        session = self.sessions.get(delta.threadId)
        if session is None:
            return
        session.streamed_items.add(delta.itemId)
        self._update(session.session_id, translate.thought_chunk(delta.itemId, delta.delta))

    def _on_reasoning_part_added(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ReasoningSummaryPartAdded)
        session = self.sessions.get(note.threadId)
        # Summary parts are paragraphs: separate them as Codex's own UI does.
        if session is not None and note.summaryIndex > 0:
            self._update(session.session_id, translate.thought_chunk(note.itemId, "\n\n"))

    def _on_item_completed(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ItemNotification)
        session = self.sessions.get(note.threadId)
        if session is None:
            return
        item = codex.decode_item(note.item)
        item_id = item.id
        streamed = item_id in session.streamed_items
        session.streamed_items.discard(item_id)
        for update in translate.completed_item_updates(item, streamed):
            self._update(session.session_id, update)

    def _on_token_usage(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ThreadTokenUsageUpdated)
        session = self.sessions.get(note.threadId)
        update = translate.usage_update(note.tokenUsage)
        if session is not None and update is not None:
            self._update(session.session_id, update)

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

    # -- output helpers ---------------------------------------------------------------------

    def _codex_request(
        self, method: str, params: Any, on_result: OnResult, on_error: OnError
    ) -> None:
        if self.codex_lost_reason is not None:
            on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, self.codex_lost_reason))
            return
        _rid, data = self.codex.request(method, params, _Waiting(on_result, on_error))
        self._out.append(ToCodex(data))

    def _forward_error(self, rid: RequestId) -> OnError:
        def forward(error: ErrorObject) -> None:
            self._client_error(rid, _codex_error(error))

        return forward

    def _update(self, session_id: str, update: acp.SessionUpdate) -> None:
        params = acp.SessionNotification(sessionId=session_id, update=update)
        self._out.append(ToClient(self.client.notification("session/update", params)))

    def _client_result(self, rid: RequestId, result: Any) -> None:
        self._out.append(ToClient(self.client.response(rid, result)))

    def _client_error(self, rid: RequestId, exc: RpcError) -> None:
        self._out.append(ToClient(self.client.error(rid, exc.code, exc.message, exc.data)))

    def _take(self) -> list[Effect]:
        out, self._out = self._out, []
        return out


_AGENT_DELTA = msgspec.json.Decoder(codex.AgentMessageDelta)
_REASONING_DELTA = msgspec.json.Decoder(codex.ReasoningSummaryTextDelta)


def _decode(raw: Raw, kind: type[T], method: str) -> T:
    """Decode request params; a mismatch is -32602 naming the field."""
    try:
        return msgspec.json.decode(raw or b"null", type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        detail = str(exc).replace("`$`", "`params`").replace("`$.", "`params.")
        raise RpcError.invalid_params(f"Invalid params for {method}: {detail}") from None


def _codex_error(error: ErrorObject) -> RpcError:
    """A Codex JSON-RPC error, passed on with Codex's own message."""
    return RpcError(ErrorCode.INTERNAL_ERROR, f"Codex: {error.message}", error.data)
