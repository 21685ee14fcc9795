"""Prompts: ``session/prompt``, ``session/cancel``.

A session is a Codex thread (opened by :mod:`bridge.engine.features.sessions.lifecycle`);
a prompt is a turn (``turn/start``, or the request a slash command starts), answered when Codex
says the turn ended: ``completed`` → ``end_turn``, ``interrupted`` →
``cancelled``, ``failed`` → an error with Codex's message (``auth_required``
when Codex lacks credentials). What streams meanwhile is
:mod:`bridge.engine.features.prompts.streaming`'s; a turn whose model Codex cannot
reach, :mod:`bridge.engine.features.prompts.retries`'s (which stops it through
:meth:`Prompts.interrupt`). Input added to the running turn instead of queued is
steering (:mod:`bridge.engine.features.prompts._steering`, built here: a steer may start a
turn).

**One turn at a time.** A prompt sent while the session works (a turn, a
command answered without one, a resume after Codex came back) is queued, and
starts when the work ends, in arrival order; ``session/cancel`` answers the
queued ones ``cancelled`` at once and interrupts the turn (once Codex has
named it: a turn Codex has not named yet is interrupted as soon as it is).
``/rewind`` alone is refused instead (-32600): it takes back finished prompts, and
the one running would have it take back something else than the user saw. A
turn another client of the same Codex started on the session is the session's
turn too (``TurnKind.FOREIGN``). The turn's states and their changes are
:mod:`bridge.engine.core.turns`'s: this feature tells it what happened.

**Insertion.** A prompt is *inserted* when its work begins, as a user
message with an id: the prompts feature states it
(:class:`~bridge.engine.core.facts.PromptInserted`) and each face renders it
(v2 answers the prompt then; v1 says nothing). An ordinary prompt awaits
Codex's ``userMessage`` item for it (``ThreadRecord.awaiting_message``) and
takes that item's id, the one history replays it under. It is inserted under
an id of this bridge's (``SESSION-prompt-N``) when no such item will come or
comes too late: a slash command, when Codex accepts its request (or at once
when the bridge answers it itself); a turn whose tool call or plan
(:data:`~bridge.engine.core.turns.TURN_TRAFFIC`) is about to go out first (the
hub sees it: :meth:`~bridge.engine.core.client_link.ClientLink.update`); a turn that ends without
one. A prompt refused before insertion is never inserted. The insertion itself,
whoever sees it first, is :func:`bridge.engine.core.turns.insert`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

from msgspec import Raw

from ....acp import types as acp_types
from ....codex import commands as codex_commands
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import ErrorCode, RequestId, RpcError
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges, facts, news, turns
from ...core.answers import decode_params, from_codex
from ...core.codex_asks import FindTurn, InterruptTurn, StartTurn
from ...core.exchanges import Exchange, Later
from ...core.hub import Hub
from ...core.machines import LOCAL
from ...core.record_parts import Prompt, QueuedPrompt, Turn, TurnKind
from ...core.threads import ThreadRecord
from ...views import translate
from ...views.commands import QuickCommand, command_request, is_rewind
from ._input import prompt_to_input
from ._ports import MachineGate, PlanQuestion, QuickCommands, TurnSettings
from ._steering import Steering
from ._turn_errors import lacks_credentials, policy_message

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Prompts:
    """A prompt is a turn, resolved when the turn ends."""

    hub: Hub
    _: KW_ONLY
    settings: TurnSettings
    palette: QuickCommands
    machines: MachineGate
    #: The question a proposed plan left open: withdrawn as a prompt the session takes
    #: arrives, before it queues or starts.
    plans: PlanQuestion
    #: Input added to the running turn: it waits for the turn to be named, starts a
    #: turn of its own on an idle session (built here: it needs this feature's turns).
    steering: Steering = field(init=False)
    #: Quick commands answered so far (their messages' ids).
    _quick_count: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.steering = Steering(self.hub, turns=self, settings=self.settings)

    # -- client requests ---------------------------------------------------------------

    def session_prompt(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_types.PromptParams, "session/prompt")
        self.prompt(rid, params.sessionId, params.prompt)

    def prompt(self, rid: RequestId, session_id: str, content: list[Raw]) -> None:
        """``session/prompt`` (v1 and v2): ``content`` as the client sent it."""
        record = self.hub.threads.require(session_id)
        if record.life.closing is not None:
            raise RpcError(ErrorCode.INVALID_REQUEST, f"session {record.id} is being closed")
        if record.life.gone is not None:
            raise RpcError.not_found(record.life.gone, {"sessionId": record.id})
        inputs = prompt_to_input(content)
        busy = record.turn is not None or bool(record.queued) or record.life.resuming
        if busy and is_rewind(record, inputs):
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "/rewind takes back finished prompts only: the session is still working "
                "(wait for it, or cancel it first)",
                {"sessionId": record.id},
            )
        self.plans.withdraw(record.id)
        record.prompts[rid] = Prompt(rid, content)
        if busy:
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
        turn = turns.begin(record, TurnKind.STEER if rid is None else TurnKind.PROMPT, rid)
        if command is not None:
            method, request = command
            hub.codex.ask(
                record,
                StartTurn(turn, command=True),
                method,
                request,
                codex_commands.CommandStartResult,
                self._turn_accepted,
                self._turn_refused,
            )
            return
        exchanges.start(hub, self._turn_sent(record, turn, inputs, self.settings.machine(record)))

    def _turn_sent(
        self, record: ThreadRecord, turn: Turn, inputs: list[Any], machine: str
    ) -> Exchange:
        """``turn/start``, once the session's machine can take the turn (here: at once)."""
        hub, rid = self.hub, turn.request_id
        if machine != LOCAL:
            folders = (record.cwd, *record.life.folders)
            reason = yield Later(partial(self._reach, machine, record.id, folders))
            if reason is not None:
                self._unreached(record, turn, machine, reason)
                return
        if not turns.current(record, turn):
            return
        if turn.cancelled:
            # Cancelled while its machine was being reached: it never started.
            self._unreached(record, turn, machine, None)
            return
        request = codex_types.TurnStartParams(threadId=record.id, input=inputs)
        self.settings.turn_starting(record, request)
        self.machines.turn_starting(machine)
        if record.life.folders_unsent or (hub.setup.codex_shared and record.life.folders):
            # Opened naming other folders than Codex kept in the thread: the client's.
            # On a shared Codex, every turn: another window's turn may have set its own.
            request.runtimeWorkspaceRoots = [record.cwd, *record.life.folders]
            record.life.folders_sent()
        if rid is not None:
            self._await_item(record, rid)
        hub.codex.ask(
            record,
            StartTurn(turn),
            "turn/start",
            request,
            codex_commands.CommandStartResult,
            self._turn_accepted,
            self._turn_refused,
        )

    def _reach(
        self,
        machine: str,
        thread_id: str,
        folders: tuple[str, ...],
        reached: Callable[[str | None], None],
    ) -> None:
        """``reached(None)`` once ``machine`` can take a turn, else ``reached(why)``."""
        self.machines.when_ready(machine, partial(reached, None), reached, thread_id, folders)

    def _unreached(
        self, record: ThreadRecord, turn: Turn, machine: str, reason: str | None
    ) -> None:
        """The turn never started: cancelled while its machine was reached (``reason``
        ``None``), or the machine could not be reached."""
        if not turns.end(record, turn):
            return
        rid = turn.request_id
        if rid is not None and reason is None:
            self._end(record, rid, acp_types.PromptResult(stopReason="cancelled"))
        elif rid is not None and reason is not None:
            error = RpcError(ErrorCode.INTERNAL_ERROR, reason, {"machine": machine})
            self._end(record, rid, error)
        else:
            log.warning("steer on session %s not started: %s", record.id, reason)
        self._work_ended(record)

    def _turn_accepted(
        self, record: ThreadRecord, asked: StartTurn, result: codex_commands.CommandStartResult
    ) -> None:
        """Codex accepted the turn's start (or the command's request), still the record's."""
        turn, rid = asked.turn, asked.turn.request_id
        if result.turn is not None:
            record.life.stored()  # Codex writes the thread as it starts a turn
        # A command's result may name no turn (``thread/compact/start``): then
        # the ``turn/started`` that follows names it (:meth:`turn_started`).
        if rid is not None and asked.command:
            self._insert_now(record, rid)  # no user message item will name it
        if result.turn is not None:
            self._name_turn(record, turn, result.turn.id)

    def _turn_refused(self, record: ThreadRecord, asked: StartTurn, error: ErrorObject) -> None:
        """Codex refused to start the turn (or the command), still the record's."""
        turn, rid = asked.turn, asked.turn.request_id
        if not turns.end(record, turn):
            return
        if rid is not None and record.life.gone is not None:
            self._end(record, rid, RpcError.not_found(record.life.gone, {"sessionId": record.id}))
        elif rid is not None and error.message.startswith(codex_threads.THREAD_NOT_FOUND):
            message = (
                f"Session not found: Codex no longer has {record.id} "
                "(deleted, perhaps in another window)"
            )
            data = {"sessionId": record.id, "codex": error.message}
            self._end(record, rid, RpcError.not_found(message, data))
        elif rid is not None:
            self._end(record, rid, from_codex(error))
        else:
            log.warning("turn/start for a steer refused: %s", error.message)
        self._work_ended(record)

    def cancel(self, record: ThreadRecord) -> None:
        """Stop the session's prompt, if any: it resolves ``cancelled`` once Codex
        reports its turn interrupted (``session/cancel``, ``session/close``). Prompts
        queued behind it are answered ``cancelled`` at once: they never start."""
        self.cancel_queued(record)
        turn = record.turn
        if turn is None or turn.cancelled:
            return
        if not turns.is_root(turn):
            return  # a sub-agent's: its cancel is the sub-agents feature's
        turns.cancel(turn)
        self.interrupt(record, turn)

    def cancel_queued(self, record: ThreadRecord) -> None:
        """Answer the prompts queued on the session ``cancelled``, leaving its turn alone
        (a close while another client's turn runs: that turn is theirs)."""
        queued, record.queued = record.queued, []
        for waiting in queued:
            self._end(record, waiting.request_id, acp_types.PromptResult(stopReason="cancelled"))

    # -- insertion ----------------------------------------------------------------------------

    def _await_item(self, record: ThreadRecord, rid: RequestId) -> None:
        """Prompt ``rid``'s ``turn/start`` goes to Codex: it is inserted once Codex's user
        message item for it starts (:meth:`item_started`), under that item's id (the one
        history replays it under)."""
        prompt = record.prompts.get(rid)
        if prompt is not None and prompt.message_id is None:
            record.awaiting_message = rid

    def item_started(self, note: ItemNotification) -> None:
        """Codex's user message item names the prompt awaiting it: inserted now."""
        item = note.item
        if type(item) is not codex_types.UserMessageItem:
            return
        record = self.hub.threads.session(note.threadId)
        if record is not None and record.awaiting_message is not None:
            self._insert_awaited(record, item.id)

    def _insert_now(self, record: ThreadRecord, rid: RequestId) -> None:
        """Prompt ``rid`` is inserted now, under an id of this bridge's (a slash command
        Codex accepted, or one answered without a turn: no user message item names it)."""
        prompt = record.prompts.get(rid)
        if prompt is not None and prompt.message_id is None:
            self._insert(record, prompt, None)

    def _insert_awaited(self, record: ThreadRecord, message_id: str | None) -> None:
        inserted = turns.insert_awaited(self.hub.threads, record, message_id)
        if inserted is not None:
            self.hub.client.state(inserted)

    def _insert(self, record: ThreadRecord, prompt: Prompt, message_id: str | None) -> None:
        """State the prompt's insertion, as ``message_id`` or, when none is given, an id
        of this bridge's."""
        self.hub.client.state(turns.insert(self.hub.threads, record, prompt, message_id))

    # -- turns --------------------------------------------------------------------------------

    def _run_quick(self, record: ThreadRecord, rid: RequestId, command: QuickCommand) -> None:
        """A command answered as agent text, without a turn; the session is busy (prompts
        queue) until it is answered, and a cancel meanwhile answers it ``cancelled``."""
        turn = turns.begin(record, TurnKind.QUICK, rid)
        self._quick_count += 1
        self._insert_now(record, rid)
        message_id = f"{command.name}-{self._quick_count}"
        done = partial(self._quick_answered, record, turn, rid, message_id)
        self.palette.run(record, command, done, partial(self._quick_failed, record, turn, rid))

    def _quick_answered(
        self, record: ThreadRecord, turn: Turn, rid: RequestId, message_id: str, text: str
    ) -> None:
        """A command's text: the prompt's answer, unless it was cancelled meanwhile."""
        if self._quick_ending(record, turn, rid):
            chunk = acp_types.AgentMessageChunk(
                content=acp_types.TextContent(text=text), messageId=message_id
            )
            self.hub.client.update(record.id, chunk)
            self._quick_end(record, rid, acp_types.PromptResult(stopReason="end_turn"))

    def _quick_failed(
        self, record: ThreadRecord, turn: Turn, rid: RequestId, error: RpcError
    ) -> None:
        if self._quick_ending(record, turn, rid):
            self._quick_end(record, rid, error)

    def _quick_ending(self, record: ThreadRecord, turn: Turn, rid: RequestId) -> bool:
        """The command's turn ends: ``False`` when it had ended already, or was cancelled
        (then its prompt is answered ``cancelled`` here)."""
        if not turns.end(record, turn):
            return False
        if turn.cancelled:
            self._quick_end(record, rid, acp_types.PromptResult(stopReason="cancelled"))
            return False
        return True

    def _quick_end(self, record: ThreadRecord, rid: RequestId, outcome: Any) -> None:
        self._end(record, rid, outcome)
        self._work_ended(record)

    def _work_ended(self, record: ThreadRecord) -> None:
        """The session's prompt was answered (its turn ended, or Codex refused it), or a
        turn nobody here waited for ended: the engine says what follows (a close waiting
        on it finishes, waiting steers meet an idle session, the next prompt starts)."""
        self.hub.happened(news.WorkEnded(record))

    def _name_turn(self, record: ThreadRecord, turn: Turn, turn_id: str) -> None:
        """Codex named the session's turn (its answer to ``turn/start``, or ``turn/started``,
        whichever came first): a cancel or a stop waiting for the id is sent now."""
        if not turns.named(record, turn, turn_id):
            return
        # Where it acts, for a rewind (Codex's stored turns do not say).
        if turn.kind is not TurnKind.FOREIGN and record.settings is not None:
            record.turn_machines[turn_id] = record.settings.machine
        if turn.cancelled or turn.failure is not None:
            self.interrupt(record, turn)
        self.steering.turn_known(record)

    def interrupt(self, record: ThreadRecord, turn: Turn) -> None:
        """Send ``turn/interrupt`` for ``turn``, once (a cancel, or the bridge stopping it:
        :mod:`bridge.engine.features.prompts.retries`); its prompt is answered at ``turn/completed``."""
        # Without a turn id there is nothing to interrupt yet; _name_turn sends
        # it as soon as Codex names the turn.
        if turns.looking_up(turn):
            # Another client's turn already running when this session opened: Codex
            # names it in the thread's turns.
            self._find_running_turn(record, turn)
            return
        self.hub.codex.interrupt(record, turn, _interrupt_refused)

    def _find_running_turn(self, record: ThreadRecord, turn: Turn) -> None:
        """Interrupt ``turn`` once ``thread/read`` names it (the session's last turn, in
        progress); nothing to do when it has ended meanwhile."""
        self.hub.codex.ask(
            record,
            FindTurn(turn),
            "thread/read",
            codex_threads.ThreadReadParams(threadId=record.id, includeTurns=True),
            codex_threads.ThreadReadResult,
            self._running_turn_read,
            _running_turn_unread,
        )

    def _running_turn_read(
        self, record: ThreadRecord, asked: FindTurn, result: codex_threads.ThreadReadResult
    ) -> None:
        last = result.thread.turns[-1] if result.thread.turns else None
        if last is None or last.status != "inProgress":
            return
        if turns.found(record, asked.turn, last.id):
            self.interrupt(record, asked.turn)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or record.parent_id is not None:
            return
        record.life.stored()
        if turns.foreign_started(record, note.turn.id) is not None:
            # Started by another client of the same Codex (another window on this
            # session, Codex's TUI): the session's turn all the same (see TurnKind.FOREIGN).
            log.info("session %s: turn %s started by another client", record.id, note.turn.id)
            self.steering.turn_known(record)
            return
        turn = record.turn
        if turn is not None and turns.is_root(turn):
            self._name_turn(record, turn, note.turn.id)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        hub = self.hub
        record = hub.threads.session(note.threadId)
        if record is None:
            return
        turn = record.turn
        if (
            turn is None
            or not turns.is_root(turn)
            or (turn.id is not None and turn.id != note.turn.id)
        ):
            return
        turns.end(record, turn)
        rid = turn.request_id
        if rid is None:  # a steer's turn or another client's: nobody here waits for it
            self._work_ended(record)
            return
        status = note.turn.status
        if turn.failure is not None and not turn.cancelled and status != "completed":
            # Stopped by the bridge (no sign-in, the model out of reach): that is the answer.
            self._end(record, rid, turn.failure)
        elif status == "completed":
            usage = translate.turn_usage(turn)
            self._end(record, rid, acp_types.PromptResult(stopReason="end_turn", usage=usage))
        elif status == "interrupted" or (status == "failed" and turn.cancelled):
            # A failure caused by the user's cancel is still a cancel (ACP).
            usage = translate.turn_usage(turn)
            self._end(record, rid, acp_types.PromptResult(stopReason="cancelled", usage=usage))
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
            self._end(record, rid, RpcError(code, message, data))
        self._work_ended(record)

    def _end(
        self, record: ThreadRecord, rid: RequestId, outcome: acp_types.PromptResult | RpcError
    ) -> None:
        """Prompt ``rid``'s work ended: its answer (or, in v2, its work state) says how."""
        prompt = record.prompts.pop(rid, None)
        if record.awaiting_message == rid and rid in self.hub.client.open_requests:
            if isinstance(outcome, RpcError):
                record.awaiting_message = None  # refused before Codex named it: never inserted
            elif prompt is not None and prompt.message_id is None:
                self._insert(record, prompt, None)  # its turn ran, though no item named it
        self.hub.happened(facts.PromptEnded(record, rid, prompt, outcome))

    # -- what every turn states -----------------------------------------------------------

    def state_turn_started(self, note: codex_types.TurnNotification) -> None:
        """Codex started a turn on the thread (a prompt's, or one nobody here asked for):
        a fact for the face, once the features that react to it have (see the engine's
        routing table)."""
        self.hub.client.state(facts.TurnStarted(note.threadId, note.turn.id))

    def state_turn_ended(self, note: codex_types.TurnNotification) -> None:
        """Codex ended a turn on the thread, thus: a fact for the face, once the features
        that react to it have (the prompt's answer, its tool calls, its questions)."""
        error = note.turn.error.message if note.turn.error else None
        self.hub.client.state(facts.TurnEnded(note.threadId, note.turn.id, note.turn.status, error))

    def resume_done(self, record: ThreadRecord) -> None:
        """Codex answered the session's resume after it came back: prompts that waited for
        it start, or hear why the session is gone."""
        if record.life.gone is None:
            self.start_next(record)
            return
        queued, record.queued = record.queued, []
        for waiting in queued:
            self._end(
                record,
                waiting.request_id,
                RpcError.not_found(record.life.gone, {"sessionId": record.id}),
            )

    def start_next(self, record: ThreadRecord) -> None:
        """The session's turn ended: the first queued prompt starts, if the session is
        still open."""
        if (
            record.turn is None
            and record.queued
            and record.life.closing is None
            and self.hub.threads.session(record.id) is record
        ):
            waiting = record.queued.pop(0)
            self._start(record, waiting.request_id, waiting.inputs)

    def codex_lost(self, reason: str) -> None:
        """Codex is gone: every prompt in flight is answered now (its turn will never
        be heard of again): ``cancelled`` if the user had cancelled it, else the reason."""
        for record in self.hub.threads.sessions():
            record.life.resume_ended()
            queued, record.queued = record.queued, []
            for waiting in queued:
                self._end(record, waiting.request_id, RpcError.internal(reason))
            turn = record.turn
            if turn is not None and turn.kind in (TurnKind.STEER, TurnKind.FOREIGN):
                turns.lost(record)
            elif turn is not None and turn.request_id is not None:
                turns.lost(record)
                if turn.cancelled:
                    self._end(
                        record, turn.request_id, acp_types.PromptResult(stopReason="cancelled")
                    )
                else:
                    self._end(record, turn.request_id, RpcError.internal(reason))


def _interrupt_refused(_record: ThreadRecord, _asked: InterruptTurn, error: ErrorObject) -> None:
    # The turn may have ended just before the interrupt arrived; its
    # turn/completed answers the prompt either way.
    log.info("turn/interrupt refused: %s", error.message)


def _running_turn_unread(_record: ThreadRecord, _asked: FindTurn, error: ErrorObject) -> None:
    log.info("thread/read to cancel refused: %s", error.message)
