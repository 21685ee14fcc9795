"""Sessions and prompts: ``session/new``, ``session/prompt``, ``session/cancel``,
and a turn's streamed answer, reasoning and token usage.

A session is a Codex thread (``thread/start``); a prompt is a turn
(``turn/start``, or the request a slash command starts), answered when Codex
says the turn ended: ``completed`` → ``end_turn``, ``interrupted`` →
``cancelled``, ``failed`` → an error with Codex's message (``auth_required``
when Codex lacks credentials). A turn whose model Codex cannot reach is never
left to Codex's endless retries: the client hears of each, and the bridge stops
the turn (``auth_required`` when nobody is signed in, else an error naming the
model provider) once Codex is past its own retry budget.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Protocol

from msgspec import Raw

from ...acp import types as acp_types
from ...codex import commands as codex_commands
from ...codex import palette as codex_palette
from ...codex import settings as codex_settings
from ...codex import threads as codex_threads
from ...codex import types as codex_types
from ...codex.messages import ItemNotification
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ...jsonrpc.peer import ErrorObject
from ..core.hub import Hub, check_directory, decode_params, from_codex
from ..core.threads import QueuedPrompt, ThreadRecord, Turn
from ..views import translate
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
        self._send_interrupt(record, turn)

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
            self._send_interrupt(record, turn)
        self.steering.turn_known(record)

    def _send_interrupt(self, record: ThreadRecord, turn: Turn) -> None:
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
            self._send_interrupt(record, turn)

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

    def error(self, note: codex_types.ErrorNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or turn is None or turn.request_id is None:
            return
        if turn.id is not None and turn.id != note.turnId:
            return
        if not note.willRetry:
            turn.error_message = note.error.message
            turn.error_info = note.error.codexErrorInfo
            return
        # Codex cannot reach its model and retries, for as long as it takes when the
        # network is down: the client hears of it, and the prompt is bounded (never silent).
        turn.retries += 1
        if not _BUDGETED_RETRY.search(note.error.message):
            turn.waits += 1
        if turn.failure is not None:
            return
        self._retrying(record, note)
        if turn.retries == 1:
            self._check_sign_in(record, turn)
        if turn.waits >= GIVE_UP_AFTER_WAITS:
            self._unreachable(record, turn, note)

    def _retrying(self, record: ThreadRecord, note: codex_types.ErrorNotification) -> None:
        """Tell the client Codex is retrying, and why: a notice where it takes notices,
        else a thought (the answer's text stays the model's)."""
        why = _retry_reason(note.error)
        sessions = self.hub.client_capabilities.session or {}
        if sessions.get("notices") is not None:
            self.hub.update(
                record.id,
                acp_types.Notice(
                    severity="warning",
                    title="Codex cannot reach the model; retrying",
                    description=why,
                ),
            )
        else:
            text = f"Codex cannot reach the model ({why}); retrying.\n"
            self.hub.update(record.id, translate.thought_chunk(f"retry-{note.turnId}", text))

    def _check_sign_in(self, record: ThreadRecord, turn: Turn) -> None:
        """A model Codex cannot reach may be one it may not use: nobody is signed in and the
        model provider wants an OpenAI sign-in. Then waiting helps nobody (``auth_required``).
        Not asked when this bridge picks the provider itself (``-c model_provider``):
        ``account/read`` speaks of the configured one."""
        hub = self.hub
        if "model_provider" in (hub.thread_config or {}):
            return

        def read(result: codex_palette.AccountReadResult) -> None:
            if record.turn is not turn or turn.failure is not None:
                return
            if result.requiresOpenaiAuth and result.account is None:
                self._stop(
                    record,
                    turn,
                    RpcError(
                        ErrorCode.AUTH_REQUIRED,
                        "Codex is not signed in, and its model provider needs an OpenAI "
                        "sign-in: authenticate (ChatGPT or an API key), then try again",
                        {"turnId": turn.id, "requiresOpenaiAuth": True},
                    ),
                )

        hub.codex_request(
            "account/read",
            codex_palette.NoParams(),
            codex_palette.AccountReadResult,
            read,
            lambda error: log.info("account/read refused: %s", error.message),
        )

    def _unreachable(
        self, record: ThreadRecord, turn: Turn, note: codex_types.ErrorNotification
    ) -> None:
        """Codex has used its retries and waits for the network: the prompt fails, naming
        the model provider (and its URL, from ``config/read``) Codex could not reach."""
        hub = self.hub
        data: dict[str, Any] = {"turnId": note.turnId, "willRetry": True}
        if note.error.codexErrorInfo is not None:
            data["codexErrorInfo"] = note.error.codexErrorInfo
        if note.error.additionalDetails:
            data["additionalDetails"] = note.error.additionalDetails
        why = _retry_reason(note.error)

        def fail(where: str) -> None:
            if record.turn is turn and turn.failure is None:
                message = f"Codex could not reach {where} after {turn.retries} attempts: {why}"
                self._stop(record, turn, RpcError(ErrorCode.INTERNAL_ERROR, message, data))

        def read(result: codex_settings.ConfigReadResult) -> None:
            config = {**result.config, **(hub.thread_config or {})}
            provider = config.get("model_provider")
            providers = config.get("model_providers")
            table = providers.get(provider) if isinstance(providers, dict) else None
            url = table.get("base_url") if isinstance(table, dict) else None
            if isinstance(provider, str):
                data["modelProvider"] = provider
                fail(f"its model provider {provider!r}" + (f" at {url}" if url else ""))
            else:
                fail("its model provider")

        hub.codex_request(
            "config/read",
            codex_settings.ConfigReadParams(cwd=record.cwd)
            if record.cwd
            else codex_settings.ConfigReadParams(),
            codex_settings.ConfigReadResult,
            read,
            lambda _error: fail("its model provider"),
        )

    def _stop(self, record: ThreadRecord, turn: Turn, failure: RpcError) -> None:
        """End the turn for ``failure``: interrupted now, the prompt answered with it once
        Codex reports the turn ended (every update of the turn before the answer)."""
        turn.failure = failure
        log.warning("session %s: stopping its turn: %s", record.id, failure.message)
        self._send_interrupt(record, turn)

    # -- streamed content -----------------------------------------------------------------

    def item_started(self, note: ItemNotification) -> None:
        """An answer Codex already says not to show streams nothing (its completion
        shows what stands in its place)."""
        item = note.item
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if turn is not None and turn.joined is not None:
            turn.joined.add(item.id)
        if type(item) is not codex_types.AgentMessageItem:
            return
        if record is not None and not translate.presentation(item).answer:
            record.withheld_items.add(item.id)

    def agent_message_delta(self, delta: codex_types.AgentMessageDelta) -> None:
        record = self.hub.threads.session(delta.threadId)
        if record is None or (record.withheld_items and delta.itemId in record.withheld_items):
            return
        if _begun_elsewhere(record, delta.itemId):
            return
        record.streamed_items.add(delta.itemId)
        self.hub.update(record.id, translate.message_chunk(delta))

    def reasoning_delta(self, delta: codex_types.ReasoningSummaryTextDelta) -> None:
        record = self.hub.threads.session(delta.threadId)
        if record is None or _begun_elsewhere(record, delta.itemId):
            return
        record.streamed_items.add(delta.itemId)
        self.hub.update(record.id, translate.thought_chunk(delta.itemId, delta.delta))

    def reasoning_part_added(self, note: codex_types.ReasoningSummaryPartAdded) -> None:
        record = self.hub.threads.session(note.threadId)
        # Summary parts are paragraphs: separate them as Codex's own UI does.
        if (
            record is not None
            and note.summaryIndex > 0
            and not _begun_elsewhere(record, note.itemId)
        ):
            self.hub.update(record.id, translate.thought_chunk(note.itemId, "\n\n"))

    def item_completed(self, note: ItemNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return
        item = note.item
        streamed = item.id in record.streamed_items
        record.streamed_items.discard(item.id)
        record.withheld_items.discard(item.id)
        for update in translate.completed_item_updates(item, streamed):
            self.hub.update(record.id, update)

    def token_usage(self, note: codex_types.ThreadTokenUsageUpdated) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is not None:
            record.usage = note.tokenUsage
        update = translate.usage_update(note.tokenUsage)
        if record is not None and update is not None:
            self.hub.update(record.id, update)


def _ignore(_result: Any) -> None:
    pass


def _begun_elsewhere(record: ThreadRecord, item_id: str) -> bool:
    """An item of a turn that ran before the session opened here, started before then:
    its deltas are not shown (its beginning was never seen), its completion shows it whole."""
    turn = record.turn
    return turn is not None and turn.joined is not None and item_id not in turn.joined


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


#: Codex's retries within its budget say how far they are ("Reconnecting... 2/5"); past
#: it, Codex waits for the network without end ("Reconnecting... waiting for network").
_BUDGETED_RETRY = re.compile(r"\b\d+/\d+\b")
#: Retries past the budget a prompt waits for before it fails: Codex 0.169 sends them
#: some 5 to 10 seconds apart, so a prompt that cannot reach its model fails within
#: about 20 seconds of Codex giving up its own budget.
GIVE_UP_AFTER_WAITS = 2


def _retry_reason(error: codex_types.TurnError) -> str:
    """Codex's words for a retry: its message, and the cause it gives."""
    details = error.additionalDetails
    return f"{error.message}: {details}" if details else error.message


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
