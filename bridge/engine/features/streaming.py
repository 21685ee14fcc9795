"""A turn's streamed content: the answer's text, the reasoning, the token usage.

Codex streams an agent message as deltas (``item/agentMessage/delta``) and its
reasoning summary likewise (``item/reasoning/summaryTextDelta``, one part per
paragraph); ``item/completed`` then carries the whole item. Each delta goes out
at once as a chunk of its message (``agent_message_chunk`` /
``agent_thought_chunk``, the item's id as ``messageId``), and the completion
sends only what was not streamed (:func:`~bridge.engine.views.translate.completed_item_updates`).
Two kinds of item stream nothing, their completion showing them whole: an answer
Codex says at ``item/started`` not to show (``withheld_items``), and one of a turn
that already ran when the session opened here, begun before then (its beginning
was never seen: ``Turn.joined``). Codex's token usage becomes ``usage_update``.

This is the hot path: ``item/agentMessage/delta`` is most of what Codex sends,
and each costs one record lookup and one update here.
"""

from __future__ import annotations

from ...codex import types as codex_types
from ...codex.messages import ItemNotification
from ..core.hub import Hub
from ..core.threads import ThreadRecord
from ..views import translate


class Streaming:
    """A turn's answer, reasoning and usage, as they stream (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def item_started(self, note: ItemNotification) -> None:
        """Note the item's beginning on a turn joined while it ran (an item begun since
        streams; one begun before does not); an answer Codex already says not to show
        streams nothing (its completion shows what stands in its place)."""
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


def _begun_elsewhere(record: ThreadRecord, item_id: str) -> bool:
    """An item of a turn that ran before the session opened here, started before then:
    its deltas are not shown (its beginning was never seen), its completion shows it whole."""
    turn = record.turn
    return turn is not None and turn.joined is not None and item_id not in turn.joined
