"""A sub-agent's work state, reported on its parent's stream, and the cancel of its work.

Part of :mod:`bridge.engine.features.subagents.subagents` (its rules 3 and 4):

- **Work state on the parent.** ``thread/status/changed`` and the child's turns become
  ``running`` / ``requires_action`` / ``idle`` (with the turn's stop reason) / ``unknown``
  (Codex lost), each sent once, as a ``subagent_update`` on the parent's stream
  (:meth:`SubagentWork.report`; :mod:`bridge.engine.core.workstate` decides the state).
  Codex creates a child ``idle`` before its first turn starts: that is no work that ended,
  so a new child's first state is ``running`` (``workstate.reportable``).
  ``capabilities.cancel`` is advertised exactly while the child has a turn the bridge can
  interrupt.
- **Cancel.** ``session/cancel`` on a child interrupts that child's turn (and its active
  descendants'); on a parent it also reaches every active descendant, because Codex does
  not cascade (:meth:`SubagentWork.cancel_tree`). A turn a cancelled sub-agent starts
  later for the same work is stopped as it starts. Idle + cancelled is reported when
  Codex says the turn was interrupted, not when it acknowledges.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from msgspec import UNSET

from ....acp import subagents as acp_subagents
from ....codex import types as codex_types
from ....jsonrpc.peer import ErrorObject
from ...core import news, turns, workstate
from ...core.codex_asks import InterruptTurn
from ...core.hub import Hub
from ...core.record_parts import Status
from ...core.threads import ThreadRecord

log = logging.getLogger(__name__)


class Questions(Protocol):
    """What a thread asked the user (:mod:`bridge.engine.features.approvals`)."""

    def cancel_thread(self, thread_id: str) -> None:
        """Answer ``cancel`` to what thread ``thread_id`` asked."""


class Commands(Protocol):
    """The commands threads left running (:mod:`bridge.engine.features.tools.terminals`)."""

    def work_cancelled(self, thread_ids: Iterable[str], *, running: Iterable[str]) -> None:
        """Stop the commands of ``thread_ids`` (of which ``running`` had a turn)."""


class SubagentWork:
    """Reports sub-agents' work state and stops their work; see the module docstring.

    ``questions`` answers ``cancel`` to what a thread asked (a cancel's cascade); the
    commands the cancelled threads left running are stopped by ``terminals``.
    """

    def __init__(self, hub: Hub, *, questions: Questions, terminals: Commands) -> None:
        self.hub = hub
        self._questions = questions
        self._terminals = terminals

    # -- work state ------------------------------------------------------------------------------

    def status_changed(self, note: codex_types.ThreadStatusChanged) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or not record.is_child:
            return
        kind = note.status.type
        if kind == "idle" and record.turn is not None:
            # Codex says idle just before the turn ends; the turn's end says how it ended.
            return
        if kind not in ("active", "idle", "systemError"):
            return
        record.work.status = Status(kind, frozenset(note.status.activeFlags))
        if kind == "active":
            record.placing.at_work()
        self.report(record)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if (
            record is None
            and self.hub.threads.forgotten_subagent(note.threadId)
            and self.closed_sessions_work(note.turn.rootTurnId)
        ):
            # Work a sub-agent of a closed session starts: no one wants it (RFD: closing
            # a parent cancels its descendants' work, and Codex does not cascade).
            stray = ThreadRecord(note.threadId)
            turns.unwanted(stray, note.turn.id)
            self.interrupt(stray)
            return
        if record is None or not record.is_child:
            return
        # A turn whose end was never seen is replaced: a cancel that reached it still stands.
        turn = turns.subagent_started(record, note.turn.id, note.turn.rootTurnId)
        record.placing.at_work()
        self.report(record)
        if self.hub.threads.in_cancelled_work(record):
            # A turn of work the client cancelled (Codex does not cascade): stop it now.
            turns.cancel(turn)
            self.interrupt(record)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or not record.is_child:
            return
        turns.end_named(record, note.turn.id)
        error = note.turn.error.message if note.turn.error else None
        workstate.turn_ended(record, note.turn.status, error)
        self.report(record)

    def report(self, record: ThreadRecord) -> None:
        """Send the child's work state (and cancel capability) on its parent's stream, if changed.

        A child with no state to report yet (:func:`workstate.reportable`) keeps what
        was last sent, if anything."""
        state = workstate.reportable(record)
        can_cancel = workstate.cancellable(record)
        state_changed = state is not None and record.work.reported != state
        caps_changed = record.work.reported_cancel != can_cancel
        if state is not None:
            record.work.reported = state
        record.work.reported_cancel = can_cancel
        if not record.visible or record.parent_id is None or not (state_changed or caps_changed):
            return
        self.hub.client.update(
            record.parent_id,
            acp_subagents.SubagentUpdate(
                sessionId=record.id,
                state=state if state_changed else UNSET,
                capabilities=acp_subagents.SubagentCapabilities(cancel={} if can_cancel else None)
                if caps_changed
                else UNSET,
            ),
        )

    def codex_lost(self, _reason: str) -> None:
        for record in self.hub.threads.children():
            reported = record.work.reported
            if reported is not None and reported.state in ("running", "requires_action"):
                turns.lost(record)
                record.work.lost = True
                self.report(record)

    # -- cancel -----------------------------------------------------------------------------------

    def cancel_tree(self, session_id: str) -> None:
        """Stop the current work of ``session_id``'s children and all their descendants
        (and of ``session_id`` itself when it is a child): Codex does not cascade."""
        # Only running work is marked: a cancel never outlives the work it stopped,
        # so an idle child takes its next assignment normally.
        threads = self.hub.threads
        record = threads.session(session_id)
        root_turn = record.turn if record is not None and record.parent_id is None else None
        if record is not None and root_turn is not None and root_turn.id is not None:
            record.work.cancelled_turns.add(root_turn.id)
        targets = [record] if record is not None and record.is_child else []
        for child in targets + threads.descendants(session_id):
            if child.turn is not None:
                turns.cancel(child.turn)
                self.interrupt(child)
            if child.id != session_id:
                self._questions.cancel_thread(child.id)

    def cancel_work(self, session_id: str) -> None:
        """Cancel the work under ``session_id`` (``session/cancel``, ``session/close``):
        its sub-agents' turns, then every command the cancelled threads left running."""
        threads = self.hub.threads
        record = threads.session(session_id)
        self.cancel_tree(session_id)
        if record is None:
            return  # never stop the commands of a thread the client does not hold
        tree = [record, *threads.descendants(session_id)]
        self._terminals.work_cancelled(
            [r.id for r in tree], running=[r.id for r in tree if r.turn is not None]
        )

    def interrupt(self, record: ThreadRecord) -> None:
        """Ask Codex to interrupt ``record``'s turn, once; its ``turn/completed`` tells the end."""
        if record.turn is not None:
            self.hub.codex.interrupt(record, record.turn, self._refused)

    def _refused(self, record: ThreadRecord, asked: InterruptTurn, error: ErrorObject) -> None:
        # The turn may have just ended; its turn/completed reports what happened.
        log.info("turn/interrupt of %s refused: %s", record.id, error.message)
        turns.interrupt_refused(asked.turn)
        self.hub.happened(news.InterruptRefused())  # turn ends held behind it may go

    def closed_sessions_work(self, root_turn: str | None) -> bool:
        """Whether a sub-agent's turn working for ``root_turn`` is work of a session this
        connection closed: a turn it started there (or one it cannot tell). Another
        client's turn on a shared thread (another window) goes on without this one."""
        return root_turn is None or root_turn in self.hub.threads.forgotten_turns
