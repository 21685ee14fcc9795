"""Sessions and prompts: ``session/new``, ``session/prompt``, ``session/cancel``.

A session is a Codex thread (``thread/start``); a prompt is a turn
(``turn/start``, or the request a slash command starts), answered when Codex
says the turn ended: ``completed`` → ``end_turn``, ``interrupted`` →
``cancelled``, ``failed`` → an error with Codex's message (``auth_required``
when Codex lacks credentials). A prompt sent while the session works waits its
turn; input added to the running turn instead is steering
(:mod:`bridge.engine.features.steering`, built here: a steer may start a turn).
What the turn streams is :mod:`bridge.engine.features.streaming`'s; a turn whose
model Codex cannot reach is stopped by :mod:`bridge.engine.features.retries`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from msgspec import Raw

from ...acp import types as acp_types
from ...codex import commands as codex_commands
from ...codex import threads as codex_threads
from ...codex import types as codex_types
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ...jsonrpc.peer import ErrorObject
from ..core.hub import Hub, check_directory, decode_params, from_codex
from ..core.threads import QueuedPrompt, ThreadRecord, Turn
from .commands import QuickCommand, command_request
from .prompt_input import prompt_to_input
from .steering import Steering

log = logging.getLogger(__name__)

#: Called with the new thread's record, the ``session/new`` request, the result
#: about to be sent and Codex's answer: sends the result and what follows it.
Opened = Callable[[ThreadRecord, RequestId, Any, codex_types.ThreadStartResult], None]
#: Adds to ``thread/start`` what the session asks for (MCP servers).
ThreadStarting = Callable[[acp_types.NewSessionParams, codex_types.ThreadStartParams], None]


class TurnSettings(Protocol):
    """The session's settings (:mod:`bridge.engine.features.settings`), as a turn needs them."""

    def turn_starting(self, record: ThreadRecord, request: codex_types.TurnStartParams) -> None:
        """Add the user's picks (mode, model, effort) to a ``turn/start``."""

    def input_modalities(self, record: ThreadRecord) -> list[str] | None:
        """The input the session's model takes (``None``: not known)."""


class QuickCommands(Protocol):
    """Runs the slash commands answered without a turn (:mod:`bridge.engine.features.palette`)."""

    def run(
        self,
        record: ThreadRecord,
        command: QuickCommand,
        done: Callable[[str], None],
        failed: Callable[[RpcError], None],
    ) -> None:
        """Call ``done`` with the command's text, or ``failed`` with the error to answer."""


class Prompts:
    """A session is a Codex thread; a prompt is a turn, resolved when the turn ends."""

    def __init__(
        self,
        hub: Hub,
        *,
        settings: TurnSettings,
        palette: QuickCommands,
        open_root: Callable[[str, str], ThreadRecord],
        opened: Opened,
        thread_starting: ThreadStarting,
        settled: Callable[[ThreadRecord], None],
        inserted: Callable[[RequestId, bool], None],
    ) -> None:
        self.hub = hub
        self._settings = settings
        self._palette = palette
        self._open_root = open_root
        self._opened = opened
        self._thread_starting = thread_starting
        #: Called once a prompt has been answered because its turn ended or Codex
        #: refused to start it (``session/close`` waits for this).
        self._settled = settled
        #: Called once a prompt's work begins (ACP v2 answers the prompt then): with
        #: ``True`` as its turn/start goes to Codex (the turn's user message item will
        #: name it), with ``False`` once Codex accepted a slash command's request or a
        #: command answered without a turn started.
        self._inserted = inserted
        #: Input added to the running turn: it waits for the turn to be named, starts a
        #: turn of its own on an idle session (built here: it needs this feature's turns).
        self.steering = Steering(hub, turns=self, settings=settings)
        #: Quick commands answered so far (their messages' ids).
        self._quick_count = 0

    # -- client requests ---------------------------------------------------------------

    def session_new(self, rid: RequestId, raw: Raw) -> None:
        hub = self.hub
        params = decode_params(raw, acp_types.NewSessionParams, "session/new")
        check_directory(hub, params.cwd, "session/new")
        start = codex_types.ThreadStartParams(cwd=params.cwd)
        if hub.thread_config:
            start.config = dict(hub.thread_config)
        self._thread_starting(params, start)

        def started(opened: codex_types.ThreadStartResult) -> None:
            record = self._open_root(opened.thread.id, params.cwd)
            record.unstored = True  # Codex writes a thread at its first turn
            self._opened(record, rid, acp_types.NewSessionResult(sessionId=record.id), opened)

        hub.codex_request(
            "thread/start",
            start,
            codex_types.ThreadStartResult,
            started,
            hub.pass_error_to(rid),
        )

    def session_prompt(self, rid: RequestId, raw: Raw) -> None:
        hub = self.hub
        params = decode_params(raw, acp_types.PromptParams, "session/prompt")
        record = hub.threads.require(params.sessionId)
        if record.closing is not None:
            raise RpcError(ErrorCode.INVALID_REQUEST, f"session {record.id} is being closed")
        if record.gone is not None:
            raise RpcError.not_found(record.gone, {"sessionId": record.id})
        inputs = prompt_to_input(params.prompt)
        if record.turn is not None or record.queued or record.resuming:
            # Typed while the agent works: it runs when the turn ends, in arrival order.
            record.queued.append(QueuedPrompt(rid, inputs))
            log.info(
                "session %s: prompt %s queued (%d waiting)", record.id, rid, len(record.queued)
            )
            return
        self._start(record, rid, inputs)

    def start_turn(self, record: ThreadRecord, inputs: list[Any]) -> None:
        """Start a turn no prompt waits for (a steer on an idle session); its updates
        stream as a prompt's do, and prompts sent meanwhile queue behind it."""
        self._start(record, None, inputs)

    def _start(self, record: ThreadRecord, rid: RequestId | None, inputs: list[Any]) -> None:
        """Start the turn (or the slash command) that answers prompt ``rid``."""
        hub = self.hub
        command = command_request(record, inputs)
        if isinstance(command, QuickCommand) and rid is not None:
            self._run_quick(record, rid, command)
            return
        if isinstance(command, QuickCommand):  # a steer is input for the model, never a command
            command = None
        turn = record.turn = Turn(request_id=rid, started_by_steer=rid is None)

        def turn_started(result: codex_commands.CommandStartResult) -> None:
            if result.turn is not None:
                record.unstored = False  # Codex writes the thread as it starts a turn
            # A command's result may name no turn (``thread/compact/start``): then
            # the ``turn/started`` that follows names it (turn_started).
            if rid is not None and record.turn is turn and command is not None:
                self._inserted(rid, False)
            if result.turn is not None:
                self._turn_known(record, turn, result.turn.id)

        def turn_refused(error: ErrorObject) -> None:
            if record.turn is turn:
                record.turn = None
                if rid is not None and record.gone is not None:
                    hub.refuse_client(
                        rid, RpcError.not_found(record.gone, {"sessionId": record.id})
                    )
                elif rid is not None:
                    hub.refuse_client(rid, from_codex(error))
                else:
                    log.warning("turn/start for a steer refused: %s", error.message)
                self._settle(record)
                self._start_next(record)

        if command is not None:
            method, request = command
        else:
            method = "turn/start"
            request = codex_types.TurnStartParams(threadId=record.id, input=inputs)
            self._settings.turn_starting(record, request)
            if rid is not None:
                self._inserted(rid, True)
        hub.codex_request(
            method, request, codex_commands.CommandStartResult, turn_started, turn_refused
        )

    def cancel(self, record: ThreadRecord) -> None:
        """Stop the session's prompt, if any: it resolves ``cancelled`` once Codex
        reports its turn interrupted (``session/cancel``, ``session/close``). Prompts
        queued behind it are answered ``cancelled`` at once: they never start."""
        queued, record.queued = record.queued, []
        for waiting in queued:
            self.hub.answer_client(
                waiting.request_id, acp_types.PromptResult(stopReason="cancelled")
            )
        turn = record.turn
        if turn is None or turn.cancel_requested:
            return
        if not _root_turn(turn):
            return  # a sub-agent's: its cancel is the sub-agents feature's
        turn.cancel_requested = True
        self.interrupt(record, turn)

    # -- turns --------------------------------------------------------------------------------

    def _run_quick(self, record: ThreadRecord, rid: RequestId, command: QuickCommand) -> None:
        """A command answered as agent text, without a turn; the session is busy (prompts
        queue) until it is answered, and a cancel meanwhile answers it ``cancelled``."""
        hub = self.hub
        turn = record.turn = Turn(request_id=rid, quick=True)
        self._quick_count += 1
        self._inserted(rid, False)
        message_id = f"{command.name}-{self._quick_count}"

        def finish() -> bool:
            if record.turn is not turn:
                return False
            record.turn = None
            if turn.cancel_requested:
                hub.answer_client(rid, acp_types.PromptResult(stopReason="cancelled"))
                self._settle(record)
                self._start_next(record)
                return False
            return True

        def done(text: str) -> None:
            if not finish():
                return
            hub.update(
                record.id,
                acp_types.AgentMessageChunk(
                    content=acp_types.TextContent(text=text), messageId=message_id
                ),
            )
            hub.answer_client(rid, acp_types.PromptResult(stopReason="end_turn"))
            self._settle(record)
            self._start_next(record)

        def failed(error: RpcError) -> None:
            if not finish():
                return
            hub.refuse_client(rid, error)
            self._settle(record)
            self._start_next(record)

        self._palette.run(record, command, done, failed)

    def _settle(self, record: ThreadRecord) -> None:
        """The session's prompt was answered (its turn ended, or Codex refused it): a close
        waiting on it finishes, then waiting steers meet an idle session."""
        self._settled(record)
        self.steering.turn_ended(record)

    def _turn_known(self, record: ThreadRecord, turn: Turn, turn_id: str) -> None:
        if record.turn is not turn or turn.id is not None:
            return
        turn.id = turn_id
        record.own_turns.add(turn_id)
        if turn.cancel_requested or turn.failure is not None:
            self.interrupt(record, turn)
        self.steering.turn_known(record)

    def interrupt(self, record: ThreadRecord, turn: Turn) -> None:
        # Without a turn id there is nothing to interrupt yet; _turn_known sends
        # it as soon as Codex names the turn.
        if turn.id is None and turn.foreign and not turn.interrupt_sent:
            # Another client's turn already running when this session opened: Codex
            # names it in the thread's turns.
            turn.interrupt_sent = True
            self._find_running_turn(record, turn)
            return
        if turn.id is None or turn.interrupt_sent:
            return
        turn.interrupt_sent = True

        def refused(error: ErrorObject) -> None:
            # The turn may have ended just before the interrupt arrived; its
            # turn/completed settles the prompt either way.
            log.info("turn/interrupt refused: %s", error.message)

        self.hub.codex_request(
            "turn/interrupt",
            codex_types.TurnInterruptParams(threadId=record.id, turnId=turn.id),
            None,
            _ignore,
            refused,
        )

    def _find_running_turn(self, record: ThreadRecord, turn: Turn) -> None:
        """Interrupt ``turn`` once ``thread/read`` names it (the session's last turn, in
        progress); nothing to do when it has ended meanwhile."""

        def read(result: codex_threads.ThreadReadResult) -> None:
            last = result.thread.turns[-1] if result.thread.turns else None
            if record.turn is not turn or last is None or last.status != "inProgress":
                return
            turn.id = last.id
            turn.interrupt_sent = False
            self.interrupt(record, turn)

        self.hub.codex_request(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=record.id, includeTurns=True),
            codex_threads.ThreadReadResult,
            read,
            lambda error: log.info("thread/read to cancel refused: %s", error.message),
        )

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or record.parent_id is not None:
            return
        record.unstored = False
        if record.turn is None:
            # Started by another client of the same Codex (another window on this
            # session, Codex's TUI): the session's turn all the same (see Turn.foreign).
            record.turn = Turn(id=note.turn.id, foreign=True)
            log.info("session %s: turn %s started by another client", record.id, note.turn.id)
            self.steering.turn_known(record)
            return
        if _root_turn(record.turn):
            self._turn_known(record, record.turn, note.turn.id)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        hub = self.hub
        record = hub.threads.session(note.threadId)
        if record is None:
            return
        record.streamed_items.clear()
        record.withheld_items.clear()
        turn = record.turn
        if (
            turn is None
            or not _root_turn(turn)
            or (turn.id is not None and turn.id != note.turn.id)
        ):
            return
        record.turn = None
        rid = turn.request_id
        if rid is None:  # a steer's turn or another client's: nobody here waits for it
            self._settle(record)
            self._start_next(record)
            return
        status = note.turn.status
        if turn.failure is not None and not turn.cancel_requested and status != "completed":
            # Stopped by the bridge (no sign-in, the model out of reach): that is the answer.
            hub.refuse_client(rid, turn.failure)
        elif status == "completed":
            hub.answer_client(rid, acp_types.PromptResult(stopReason="end_turn"))
        elif status == "interrupted" or (status == "failed" and turn.cancel_requested):
            # A failure caused by the user's cancel is still a cancel (ACP).
            hub.answer_client(rid, acp_types.PromptResult(stopReason="cancelled"))
        else:
            error = note.turn.error
            message = (error.message if error else None) or turn.error_message
            info = error.codexErrorInfo if error is not None else None
            if info is None:
                info = turn.error_info
            data: dict[str, Any] = {"turnId": note.turn.id, "status": status}
            if info is not None:
                data["codexErrorInfo"] = info
            if error is not None and error.additionalDetails:
                data["additionalDetails"] = error.additionalDetails
            # No credentials for the model: ACP's auth_required, so the client offers sign-in.
            code = ErrorCode.AUTH_REQUIRED if lacks_credentials(error) else ErrorCode.INTERNAL_ERROR
            message = policy_message(info, message) or f"Codex turn ended with status {status}"
            hub.refuse_client(rid, RpcError(code, message, data))
        self._settle(record)
        self._start_next(record)

    def resume_settled(self, record: ThreadRecord) -> None:
        """Codex answered the session's resume after it came back: prompts that waited for
        it start, or hear why the session is gone."""
        if record.gone is None:
            self._start_next(record)
            return
        queued, record.queued = record.queued, []
        for waiting in queued:
            self.hub.refuse_client(
                waiting.request_id, RpcError.not_found(record.gone, {"sessionId": record.id})
            )

    def _start_next(self, record: ThreadRecord) -> None:
        """The session's turn ended: the first queued prompt starts, if the session is
        still open."""
        if (
            record.turn is None
            and record.queued
            and record.closing is None
            and self.hub.threads.session(record.id) is record
        ):
            waiting = record.queued.pop(0)
            self._start(record, waiting.request_id, waiting.inputs)

    def codex_lost(self, reason: str) -> None:
        """Codex is gone: every prompt in flight is answered now (its turn will never
        be heard of again): ``cancelled`` if the user had cancelled it, else the reason."""
        for record in self.hub.threads.sessions():
            record.resuming = False
            queued, record.queued = record.queued, []
            for waiting in queued:
                self.hub.refuse_client(waiting.request_id, RpcError.internal(reason))
            turn = record.turn
            if turn is not None and (turn.started_by_steer or turn.foreign):
                record.turn = None
                record.streamed_items.clear()
                record.withheld_items.clear()
            elif turn is not None and turn.request_id is not None:
                record.turn = None
                record.streamed_items.clear()
                record.withheld_items.clear()
                if turn.cancel_requested:
                    self.hub.answer_client(
                        turn.request_id, acp_types.PromptResult(stopReason="cancelled")
                    )
                else:
                    self.hub.refuse_client(turn.request_id, RpcError.internal(reason))


def _ignore(_result: Any) -> None:
    pass


def _root_turn(turn: Turn) -> bool:
    """A turn of Codex's this feature runs: a prompt's, a steer's on an idle session, or
    another client's on the session (a slash command answered without a turn has none)."""
    return not turn.quick and (turn.request_id is not None or turn.started_by_steer or turn.foreign)


#: ``codexErrorInfo`` of a turn the model's usage policies stopped → what the user is told
#: (Codex's own message follows, in parentheses).
POLICY_STOPS = {
    "bioPolicy": (
        "Codex stopped: this request was flagged for possible biological risk, which "
        "OpenAI's usage policies do not allow. Rephrase it, or ask about something else."
    ),
    "cyberPolicy": (
        "Codex stopped: this request was flagged for possible cybersecurity risk, which "
        "OpenAI's usage policies do not allow. Rephrase it, or ask about something else."
    ),
}


def policy_message(info: Any, message: str | None) -> str | None:
    """A failed turn's error message: Codex's, led by what a policy stop means."""
    stop = POLICY_STOPS.get(info) if isinstance(info, str) else None
    if stop is None:
        return message
    return f"{stop} (Codex: {message})" if message else stop


_MISSING_ENV_KEY = "Missing environment variable:"


def lacks_credentials(error: codex_types.TurnError | None) -> bool:
    """Whether a failed turn failed because Codex could not authenticate to the model.

    Codex 0.169 says so in three ways: ``codexErrorInfo: "unauthorized"``; an
    HTTP 401 from the provider (``{"httpConnectionFailed": {"httpStatusCode":
    401}}`` and the other stream variants); and, for a provider whose
    ``env_key`` names an unset variable, ``codexErrorInfo: "other"`` with the
    message ``Missing environment variable: `NAME`.`` (its only sign).
    """
    if error is None:
        return False
    info = error.codexErrorInfo
    if info == "unauthorized":
        return True
    if isinstance(info, dict) and any(
        isinstance(detail, dict) and detail.get("httpStatusCode") == 401 for detail in info.values()
    ):
        return True
    return error.message.startswith(_MISSING_ENV_KEY)
