"""A cancelled turn ends after the sub-agent turns its cancel stopped.

When the user cancels a prompt, the bridge interrupts the session's turn and the
sub-agent turns under it (:mod:`bridge.engine.features.subagents.subagents`). Codex may end
the parent's turn first; the sub-agents' last updates and idle states belong to the
cancelled prompt all the same, before its answer. So a ``turn/completed`` that ends
such a turn is held here until every sub-agent turn the cancel interrupted has
ended (or Codex refused to interrupt it, or it was forgotten), then routed in full.
A session being closed waits for nothing: nothing of it reaches the client after
the close.
"""

from __future__ import annotations

from collections.abc import Iterator

from ....codex import types as codex_types
from ...core import turns
from ...core.hub import Hub
from ...core.turns import Interrupt, TurnState


class TurnEnds:
    """Holds the ``turn/completed`` of cancelled turns whose sub-agents still work."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: The held notifications, by thread.
        self._held: dict[str, codex_types.TurnNotification] = {}

    @property
    def waiting(self) -> bool:
        """Some turn's end is held."""
        return bool(self._held)

    def hold(self, note: codex_types.TurnNotification) -> bool:
        """Keep ``note`` (``True``) when it ends a cancelled turn whose sub-agents still work."""
        if self._cancelled_work_running(note):
            self._held[note.threadId] = note
            return True
        return False

    def released(self) -> Iterator[codex_types.TurnNotification]:
        """Each held ``turn/completed`` whose cancelled sub-agents have stopped, taken out
        as it is yielded (routing it may release, or hold, others meanwhile)."""
        for thread_id, note in list(self._held.items()):
            if self._held.get(thread_id) is note and not self._cancelled_work_running(note):
                del self._held[thread_id]
                yield note

    def clear(self) -> None:
        """Codex is gone: the prompts these would answer were answered already."""
        self._held.clear()

    def _cancelled_work_running(self, note: codex_types.TurnNotification) -> bool:
        """``note`` ends a turn the user cancelled while sub-agent turns its cancel stopped
        still run (interrupted, not refused: Codex will end them)."""
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or turn is None or not turn.cancelled:
            return False
        if record.life.closing is not None:
            return False
        if turn.id is not None and turn.id != note.turn.id:
            return False
        return any(
            child.turn is not None
            and turns.state(child) is TurnState.CANCELLING
            and turns.interrupt(child.turn) is Interrupt.SENT
            for child in self.hub.threads.descendants(record.id)
        )
