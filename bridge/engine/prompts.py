"""Sessions and prompts: ``session/new``, ``session/prompt``, ``session/cancel``,
and the turn's streamed answer, reasoning and token usage."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Raw

from ..acp import types as acp
from ..codex import types as codex
from ..codex.config import CommandStartResult
from ..jsonrpc import ErrorCode, RequestId, RpcError
from ..jsonrpc.peer import ErrorObject
from . import translate
from .config import lacks_credentials
from .engine import codex_error, decode_params
from .prompt import prompt_to_input
from .sessions import Prompt, Session

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)

_AGENT_DELTA = msgspec.json.Decoder(codex.AgentMessageDelta)
_REASONING_DELTA = msgspec.json.Decoder(codex.ReasoningSummaryTextDelta)


class Prompts:
    """A session is a Codex thread; a prompt is a turn, resolved when the turn ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: Called once a session's prompt has been answered because its turn ended
        #: or Codex refused to start it (``session/close`` waits for this).
        self.settled_hooks: list[Callable[[Session], None]] = []
        engine.on_client_request("session/new", self._session_new)
        engine.on_client_request("session/prompt", self._session_prompt)
        engine.on_client_notification("session/cancel", self._session_cancel)
        engine.on_codex_notification("item/agentMessage/delta", self._on_agent_message_delta)
        engine.on_codex_notification("item/reasoning/summaryTextDelta", self._on_reasoning_delta)
        engine.on_codex_notification(
            "item/reasoning/summaryPartAdded", self._on_reasoning_part_added
        )
        engine.on_codex_notification("item/completed", self._on_item_completed)
        engine.on_codex_notification("turn/started", self._on_turn_started)
        engine.on_codex_notification("turn/completed", self._on_turn_completed)
        engine.on_codex_notification("thread/tokenUsage/updated", self._on_token_usage)
        engine.on_codex_notification("error", self._on_error)
        engine.lost_hooks.append(self._on_codex_lost)

    # -- client requests ---------------------------------------------------------------

    def _session_new(self, rid: RequestId, raw: Raw) -> None:
        engine = self.engine
        params = decode_params(raw, acp.NewSessionParams, "session/new")
        if not params.cwd.startswith("/"):
            raise RpcError.invalid_params(
                f"session/new: cwd must be an absolute path, got {params.cwd!r}"
            )
        start = codex.ThreadStartParams(cwd=params.cwd)
        if engine.thread_config:
            start.config = dict(engine.thread_config)
        for hook in engine.thread_start_hooks:
            hook(params, start)

        def started(result: Raw) -> None:
            opened = msgspec.json.decode(result, type=codex.ThreadStartResult)
            session = Session(session_id=opened.thread.id, cwd=params.cwd)
            engine.add_session(session)
            response = acp.NewSessionResult(sessionId=session.session_id)
            for hook in engine.session_opened_hooks:
                hook(session, response, opened)
            engine.client_result(rid, response)
            for announced in engine.session_announced_hooks:
                announced(session)

        engine.codex_request("thread/start", start, started, engine.forward_error(rid))

    def _session_prompt(self, rid: RequestId, raw: Raw) -> None:
        engine = self.engine
        params = decode_params(raw, acp.PromptParams, "session/prompt")
        session = engine.session(params.sessionId)
        if session.prompt is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session.session_id} already has a prompt in progress",
            )
        inputs = prompt_to_input(params.prompt)
        command: tuple[str, Any] | None = None
        for ask in engine.prompt_command_hooks:
            command = ask(session, inputs)
            if command is not None:
                break
        prompt = session.prompt = Prompt(request_id=rid)

        def turn_started(result: Raw) -> None:
            # A command's result may name no turn (``thread/compact/start``): then
            # the ``turn/started`` that follows names it (_on_turn_started).
            turn = msgspec.json.decode(result, type=CommandStartResult).turn
            if turn is not None:
                self._turn_known(session, prompt, turn.id)

        def turn_refused(error: ErrorObject) -> None:
            if session.prompt is prompt:
                session.prompt = None
                engine.client_error(rid, codex_error(error))
                for hook in self.settled_hooks:
                    hook(session)

        if command is not None:
            method, request = command
        else:
            method, request = (
                "turn/start",
                codex.TurnStartParams(threadId=session.thread_id, input=inputs),
            )
            for hook in engine.turn_start_hooks:
                hook(session, request)
        engine.codex_request(method, request, turn_started, turn_refused)

    def _session_cancel(self, raw: Raw) -> None:
        params = decode_params(raw, acp.CancelParams, "session/cancel")
        session = self.engine.sessions.get(params.sessionId)
        if session is None:
            log.warning("session/cancel for unknown session %s", params.sessionId)
            return
        self.cancel(session)

    def cancel(self, session: Session) -> None:
        """Stop the session's prompt, if any: it resolves ``cancelled`` once Codex
        reports its turn interrupted (``session/cancel``, ``session/close``)."""
        prompt = session.prompt
        if prompt is None or prompt.cancel_requested:
            return
        prompt.cancel_requested = True
        self._send_interrupt(session, prompt)

    # -- turns --------------------------------------------------------------------------------

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

        self.engine.codex_request(
            "turn/interrupt",
            codex.TurnInterruptParams(threadId=session.thread_id, turnId=prompt.turn_id),
            lambda _result: None,
            refused,
        )

    def _on_turn_started(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.TurnNotification)
        session = self.engine.sessions.get(note.threadId)
        if session is not None and session.prompt is not None:
            self._turn_known(session, session.prompt, note.turn.id)

    def _on_turn_completed(self, raw: Raw) -> None:
        engine = self.engine
        note = msgspec.json.decode(raw, type=codex.TurnNotification)
        session = engine.sessions.get(note.threadId)
        if session is None:
            return
        session.streamed_items.clear()
        prompt = session.prompt
        if prompt is None or (prompt.turn_id is not None and prompt.turn_id != note.turn.id):
            return
        session.prompt = None
        status = note.turn.status
        if status == "completed":
            engine.client_result(prompt.request_id, acp.PromptResult(stopReason="end_turn"))
        elif status == "interrupted" or (status == "failed" and prompt.cancel_requested):
            # A failure caused by the user's cancel is still a cancel (ACP).
            engine.client_result(prompt.request_id, acp.PromptResult(stopReason="cancelled"))
        else:
            error = note.turn.error
            message = (error.message if error else None) or prompt.error_message
            data: dict[str, Any] = {"turnId": note.turn.id, "status": status}
            if error is not None and error.codexErrorInfo is not None:
                data["codexErrorInfo"] = error.codexErrorInfo
            if error is not None and error.additionalDetails:
                data["additionalDetails"] = error.additionalDetails
            # No credentials for the model: ACP's auth_required, so the client offers sign-in.
            code = ErrorCode.AUTH_REQUIRED if lacks_credentials(error) else ErrorCode.INTERNAL_ERROR
            engine.client_error(
                prompt.request_id,
                RpcError(code, message or f"Codex turn ended with status {status}", data),
            )
        for hook in self.settled_hooks:
            hook(session)

    def _on_codex_lost(self, reason: str) -> None:
        for session in self.engine.sessions.values():
            prompt = session.prompt
            if prompt is not None:
                session.prompt = None
                self.engine.client_error(prompt.request_id, RpcError.internal(reason))

    def _on_error(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ErrorNotification)
        session = self.engine.sessions.get(note.threadId)
        if session is None or session.prompt is None:
            return
        if not note.willRetry:
            session.prompt.error_message = note.error.message

    # -- streamed content -----------------------------------------------------------------

    def _on_agent_message_delta(self, raw: Raw) -> None:
        delta = _AGENT_DELTA.decode(raw)
        session = self.engine.sessions.get(delta.threadId)
        if session is None:
            return
        session.streamed_items.add(delta.itemId)
        self.engine.update(session.session_id, translate.message_chunk(delta))

    def _on_reasoning_delta(self, raw: Raw) -> None:
        delta = _REASONING_DELTA.decode(raw)
        session = self.engine.sessions.get(delta.threadId)
        if session is None:
            return
        session.streamed_items.add(delta.itemId)
        self.engine.update(session.session_id, translate.thought_chunk(delta.itemId, delta.delta))

    def _on_reasoning_part_added(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ReasoningSummaryPartAdded)
        session = self.engine.sessions.get(note.threadId)
        # Summary parts are paragraphs: separate them as Codex's own UI does.
        if session is not None and note.summaryIndex > 0:
            self.engine.update(session.session_id, translate.thought_chunk(note.itemId, "\n\n"))

    def _on_item_completed(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ItemNotification)
        session = self.engine.sessions.get(note.threadId)
        if session is None:
            return
        item = codex.decode_item(note.item)
        item_id = item.id
        streamed = item_id in session.streamed_items
        session.streamed_items.discard(item_id)
        for update in translate.completed_item_updates(item, streamed):
            self.engine.update(session.session_id, update)

    def _on_token_usage(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ThreadTokenUsageUpdated)
        session = self.engine.sessions.get(note.threadId)
        update = translate.usage_update(note.tokenUsage)
        if session is not None and update is not None:
            self.engine.update(session.session_id, update)
