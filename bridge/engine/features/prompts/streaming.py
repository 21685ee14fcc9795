"""A turn's streamed answer, reasoning and token usage, as the client sees them.

Codex streams a turn's answer (``item/agentMessage/delta``) and its reasoning
summary (``item/reasoning/summaryTextDelta``, paragraphs by
``item/reasoning/summaryPartAdded``) as it writes them; each delta goes to the
session as an ``agent_message_chunk`` or ``agent_thought_chunk`` at once (the
streamed answer is most of what Codex sends: this is the engine's hot path).
When the item completes, what was not streamed is shown whole
(:func:`bridge.engine.views.translate.completed_item_updates`); an ACP v2 client
is sent the answer's ``agent_message`` upsert instead, its whole text under the
chunks' ``messageId`` (:func:`bridge.engine.views.translate.answer_upsert`), so what
it shows ends as Codex completed it even if a chunk went astray.

- An answer Codex already says not to show streams nothing; its completion shows
  what stands in its place.
- A turn that ran before the session opened here (another window's, Codex's TUI)
  shows only the items it started after: an item begun before has no beginning to
  show, so its deltas are dropped and its completion shows it whole.
- An AIR client gets each answer's phase (Codex's ``phase`` of the message at
  ``item/started``: ``commentary``, ``final_answer``) on its chunks, in
  ``_meta.jetbrains.air.phase``; a message without one has none.
- ``thread/tokenUsage/updated`` is kept on the session (``/status`` reads it) and
  sent as ``usage_update``; the turn it names counts it, for the prompt's answer
  (the turn's own tokens: the thread's total less what it was before the turn).
- At each of a session's turn ends Codex is asked what the thread cost so far
  (``account/usage/read {threadId}``: an estimate in US dollars, for a ChatGPT
  sign-in on OpenAI's provider only). Where it knows, the cost goes on a
  ``usage_update`` at once and on every later one; where it does not (an API key
  sign-in: Codex refuses; another provider: not asked), no cost is sent, never a zero.
"""

from __future__ import annotations

import logging

from ....codex import account as codex_account
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc.peer import ErrorObject
from ...core.codex_asks import ReadCost
from ...core.hub import Hub
from ...core.record_parts import Turn
from ...core.threads import ThreadRecord
from ...views import translate

log = logging.getLogger(__name__)

#: Codex's estimate of what a thread cost (a ChatGPT sign-in's billing route).
COST_READ = "account/usage/read"
#: The model provider whose threads Codex can say the cost of.
OPENAI = "openai"


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
            record.stream.withheld_items.add(item.id)
        if item.phase and self.hub.handshake.air is not None:
            record.stream.message_phases[item.id] = item.phase

    def agent_message_delta(self, delta: codex_types.AgentMessageDelta) -> None:
        record = self.hub.threads.session(delta.threadId)
        if record is None or (
            record.stream.withheld_items and delta.itemId in record.stream.withheld_items
        ):
            return
        if _begun_elsewhere(record, delta.itemId):
            return
        record.stream.streamed_items.add(delta.itemId)
        chunk = translate.message_chunk(delta)
        if record.stream.message_phases:
            translate.with_phase(chunk, record.stream.message_phases.get(delta.itemId))
        self.hub.client.update(record.id, chunk)

    def reasoning_delta(self, delta: codex_types.ReasoningSummaryTextDelta) -> None:
        record = self.hub.threads.session(delta.threadId)
        if record is None or _begun_elsewhere(record, delta.itemId):
            return
        record.stream.streamed_items.add(delta.itemId)
        self.hub.client.update(record.id, translate.thought_chunk(delta.itemId, delta.delta))

    def reasoning_part_added(self, note: codex_types.ReasoningSummaryPartAdded) -> None:
        record = self.hub.threads.session(note.threadId)
        # Summary parts are paragraphs: separate them as Codex's own UI does.
        if (
            record is not None
            and note.summaryIndex > 0
            and not _begun_elsewhere(record, note.itemId)
        ):
            self.hub.client.update(record.id, translate.thought_chunk(note.itemId, "\n\n"))

    def item_completed(self, note: ItemNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return
        item = note.item
        streamed = item.id in record.stream.streamed_items
        record.stream.streamed_items.discard(item.id)
        record.stream.withheld_items.discard(item.id)
        phase = record.stream.message_phases.pop(item.id, None)
        if isinstance(item, codex_types.AgentMessageItem) and self.hub.handshake.air is not None:
            phase = item.phase or phase
        if isinstance(item, codex_types.AgentMessageItem) and self.hub.client.face.version == 2:
            # v2 has the answer's upsert: its whole text replaces what the chunks said.
            upsert = translate.answer_upsert(item, streamed=streamed)
            if upsert is not None:
                self.hub.client.update(record.id, translate.with_phase(upsert, phase))
            return
        for update in translate.completed_item_updates(item, streamed):
            self.hub.client.update(record.id, translate.with_phase(update, phase))

    def token_usage(self, note: codex_types.ThreadTokenUsageUpdated) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is not None:
            if record.turn is not None and record.turn.id == note.turnId:
                _turn_tokens(record.turn, record.stream.usage, note.tokenUsage)
            record.stream.usage = note.tokenUsage
        if record is not None:
            update = translate.usage_update(note.tokenUsage, record.stream.cost_usd_micros)
            if update is not None:
                self.hub.client.update(record.id, update)

    def codex_lost(self) -> None:
        """Codex is gone: no turn's items will come again."""
        for record in self.hub.threads.sessions():
            record.stream.turn_ended()

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """A session's turn ended: ask Codex what the thread cost so far, where it can
        know (a thread on OpenAI's provider; Codex reads it for a ChatGPT sign-in only)."""
        record = self.hub.threads.session(note.threadId)
        if record is None:
            return
        record.stream.turn_ended()
        if record.is_child or record.settings is None:
            return
        if record.settings.provider != OPENAI:
            return  # another provider's bill (a local model's, none) is not Codex's to estimate
        self.hub.codex.ask(
            record,
            ReadCost(),
            COST_READ,
            codex_account.AccountUsageReadParams(threadId=record.id),
            codex_account.AccountUsageReadResult,
            self._cost_read,
            self._cost_unknown,
        )

    def _cost_read(
        self, record: ThreadRecord, _asked: ReadCost, result: codex_account.AccountUsageReadResult
    ) -> None:
        estimate = result.threadUsage.estimatedUsageUsdMicros if result.threadUsage else None
        if estimate is None or estimate == record.stream.cost_usd_micros:
            return  # not known (never a made-up zero), or what the client was told
        record.stream.cost_usd_micros = estimate
        update = (
            translate.usage_update(record.stream.usage, estimate) if record.stream.usage else None
        )
        if update is not None:
            self.hub.client.update(record.id, update)

    def _cost_unknown(self, record: ThreadRecord, _asked: ReadCost, error: ErrorObject) -> None:
        # Signed in with an API key, or a Codex that cannot read it: no cost to show.
        log.info("%s of %s refused, no cost shown: %s", COST_READ, record.id, error.message)


def _begun_elsewhere(record: ThreadRecord, item_id: str) -> bool:
    """An item of a turn that ran before the session opened here, started before then:
    its deltas are not shown (its beginning was never seen), its completion shows it whole."""
    turn = record.turn
    return turn is not None and turn.joined is not None and item_id not in turn.joined


def _turn_tokens(
    turn: Turn, known: codex_types.ThreadTokenUsage | None, usage: codex_types.ThreadTokenUsage
) -> None:
    """Count a ``thread/tokenUsage/updated`` of ``turn`` (see
    :func:`bridge.engine.views.translate.turn_usage`). Codex repeats a count unchanged (when
    the usage limits change): the thread's total, not the sum of ``last``, says the turn's
    tokens. Before the turn, the thread had what Codex last reported; with nothing reported
    yet (a session just opened), its total less this model request's."""
    if turn.tokens_before is None:
        if known is not None:
            turn.tokens_before = known.total
        else:
            total, last = usage.total, usage.last
            turn.tokens_before = codex_types.TokenUsageBreakdown(
                totalTokens=total.totalTokens - last.totalTokens,
                inputTokens=total.inputTokens - last.inputTokens,
                cachedInputTokens=total.cachedInputTokens - last.cachedInputTokens,
                outputTokens=total.outputTokens - last.outputTokens,
                reasoningOutputTokens=total.reasoningOutputTokens - last.reasoningOutputTokens,
                cacheWriteInputTokens=None
                if total.cacheWriteInputTokens is None
                else total.cacheWriteInputTokens - (last.cacheWriteInputTokens or 0),
            )
    turn.tokens_now = usage.total
