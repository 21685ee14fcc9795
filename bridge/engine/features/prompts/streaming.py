"""A turn's streamed answer, reasoning and token usage, as the client sees them.

Codex streams a turn's answer (``item/agentMessage/delta``) and its reasoning
summary (``item/reasoning/summaryTextDelta``, paragraphs by
``item/reasoning/summaryPartAdded``) as it writes them; each delta goes to the
session as an ``agent_message_chunk`` or ``agent_thought_chunk`` at once (the
streamed answer is most of what Codex sends: this is the engine's hot path).
When the item completes, what was not streamed is shown whole
(:func:`bridge.engine.views.translate.completed_item_updates`).

- An answer Codex already says not to show streams nothing; its completion shows
  what stands in its place.
- A turn that ran before the session opened here (another window's, Codex's TUI)
  shows only the items it started after: an item begun before has no beginning to
  show, so its deltas are dropped and its completion shows it whole.
- An AIR client gets each answer's phase (Codex's ``phase`` of the message at
  ``item/started``: ``commentary``, ``final_answer``) on its chunks, in
  ``_meta.jetbrains.air.phase``; a message without one has none.
- ``thread/tokenUsage/updated`` is kept on the session (``/status`` reads it) and
  sent as ``usage_update``.
"""

from __future__ import annotations

from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ...core.hub import Hub
from ...core.threads import ThreadRecord
from ...views import translate


class Streaming:
    """What a session shows of its turn's stream (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def item_started(self, note: ItemNotification) -> None:
        """An answer Codex already says not to show streams nothing (its completion
        shows what stands in its place)."""
        item = note.item
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if turn is not None and turn.joined is not None:
            turn.joined.add(item.id)
        if type(item) is not codex_types.AgentMessageItem or record is None:
            return
        if not translate.presentation(item).answer:
            record.withheld_items.add(item.id)
        if item.phase and self.hub.air is not None:
            record.message_phases[item.id] = item.phase

    def agent_message_delta(self, delta: codex_types.AgentMessageDelta) -> None:
        record = self.hub.threads.session(delta.threadId)
        if record is None or (record.withheld_items and delta.itemId in record.withheld_items):
            return
        if _begun_elsewhere(record, delta.itemId):
            return
        record.streamed_items.add(delta.itemId)
        chunk = translate.message_chunk(delta)
        if record.message_phases:
            translate.with_phase(chunk, record.message_phases.get(delta.itemId))
        self.hub.update(record.id, chunk)

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
        phase = record.message_phases.pop(item.id, None)
        if isinstance(item, codex_types.AgentMessageItem) and self.hub.air is not None:
            phase = item.phase or phase
        for update in translate.completed_item_updates(item, streamed):
            self.hub.update(record.id, translate.with_phase(update, phase))

    def token_usage(self, note: codex_types.ThreadTokenUsageUpdated) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is not None:
            record.usage = note.tokenUsage
        update = translate.usage_update(note.tokenUsage)
        if record is not None and update is not None:
            self.hub.update(record.id, update)


def _begun_elsewhere(record: ThreadRecord, item_id: str) -> bool:
    """An item of a turn that ran before the session opened here, started before then:
    its deltas are not shown (its beginning was never seen), its completion shows it whole."""
    turn = record.turn
    return turn is not None and turn.joined is not None and item_id not in turn.joined
