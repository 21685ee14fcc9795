"""Codex items and deltas → ACP session updates (pure functions)."""

from __future__ import annotations

import logging
from typing import NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from ...acp import air, v2
from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...codex import types as codex_types
from ...codex.messages import ThreadItem
from ..core.record_parts import Turn

log = logging.getLogger(__name__)


def message_chunk(delta: codex_types.AgentMessageDelta) -> acp_types.AgentMessageChunk:
    return acp_types.AgentMessageChunk(
        content=acp_types.TextContent(text=delta.delta), messageId=delta.itemId
    )


def with_phase(update: msgspec.Struct, phase: str | None) -> msgspec.Struct:
    """An answer's chunk (or v2 upsert) with AIR's ``_meta.jetbrains.air.phase`` (Codex's
    message phase)."""
    if phase and isinstance(update, acp_types.AgentMessageChunk | v2.AgentMessage):
        update.meta = air.meta({air.PHASE: phase})
    return update


def thought_chunk(item_id: str, text: str) -> acp_types.AgentThoughtChunk:
    return acp_types.AgentThoughtChunk(content=acp_types.TextContent(text=text), messageId=item_id)


def completed_item_updates(item: ThreadItem, streamed: bool) -> list[msgspec.Struct]:
    """Updates for an item's completion.

    Text that was streamed as deltas is not sent again; an item that arrives
    whole (no deltas, e.g. a short answer) is sent as one chunk. An answer is
    presented as Codex's ``display`` says (:func:`answer_updates`).
    """
    match item:
        case codex_types.AgentMessageItem():
            return list(answer_updates(item, streamed=streamed))
        case codex_types.PlanItem():
            return [*proposed_plan(item)]
    if streamed:
        return []
    match item:
        case codex_types.ReasoningItem(id=item_id, summary=summary) if summary:
            return [thought_chunk(item_id, "\n\n".join(summary))]
    return []


def proposed_plan(item: codex_types.PlanItem) -> list[acp_tools.PlanUpdate]:
    """Plan mode's proposed plan, whole (its deltas are not streamed: Codex says they may
    not add up to the completed item), as a Markdown plan under the item's id; none when
    it is empty. Codex's todo list (``turn/plan/updated``) is another plan: ACP's ``plan``."""
    if not item.text.strip():
        return []
    plan = acp_tools.PlanMarkdown(planId=item.id, content=item.text)
    return [acp_tools.PlanUpdate(plan=plan)]


def usage_update(
    usage: codex_types.ThreadTokenUsage, cost_usd_micros: int | None = None
) -> acp_types.UsageUpdate | None:
    """Context-window use, and what the session cost so far where Codex estimated it (in
    US dollars); ``None`` when Codex does not know the window size.

    ``used`` is what the last model request put in the context window
    (``last.totalTokens``), not the thread's cumulative total: ACP asks for
    "tokens currently in context".
    """
    if usage.modelContextWindow is None:
        return None
    update = acp_types.UsageUpdate(used=usage.last.totalTokens, size=usage.modelContextWindow)
    if cost_usd_micros is not None:
        update.cost = acp_types.Cost(amount=cost_usd_micros / 1_000_000, currency="USD")
    return update


def turn_usage(turn: Turn) -> acp_types.Usage | UnsetType:
    """The tokens a turn used, as the prompt's answer says them: the thread's total at its
    end less the total before it (a turn of several model requests counts them all;
    ``last`` is only the latest request's). ``UNSET`` when Codex reported none for it.

    Codex's counts go as Codex counts them: ``inputTokens`` includes the cached reads,
    ``outputTokens`` the reasoning."""
    before, now = turn.tokens_before, turn.tokens_now
    if before is None or now is None:
        return UNSET
    write = now.cacheWriteInputTokens
    return acp_types.Usage(
        totalTokens=max(0, now.totalTokens - before.totalTokens),
        inputTokens=max(0, now.inputTokens - before.inputTokens),
        outputTokens=max(0, now.outputTokens - before.outputTokens),
        thoughtTokens=max(0, now.reasoningOutputTokens - before.reasoningOutputTokens),
        cachedReadTokens=max(0, now.cachedInputTokens - before.cachedInputTokens),
        cachedWriteTokens=UNSET
        if write is None
        else max(0, write - (before.cacheWriteInputTokens or 0)),
    )


# -- how an answer is presented ----------------------------------------------------------------
# Codex's ``moderation.display`` of an answer (docs/mapping.md, "Answers Codex withholds"):
# ``show`` it (with an annotation after it), ``hide`` it behind a replacement, or ``block``
# it with a reason. Codex names kinds, not texts: these are the bridge's words for them.

HELPLINE_NOTE = (
    "If you are going through a difficult time, you do not have to face it alone: "
    "a local crisis line or mental-health helpline can help, any time."
)
REPLACEMENT_NOTES = {
    "wellbeingPromptHelpline": "This answer is not shown. " + HELPLINE_NOTE,
}
HIDDEN_NOTE = "This answer is not shown."
BLOCK_NOTES = {
    "protection": "This answer can't be shown: OpenAI's safety protections withheld it.",
    "cyber": "This answer can't be shown: it was flagged for possible cybersecurity risk.",
}
#: A block whose reason, or a display whose mode, the bridge does not know.
WITHHELD_NOTE = "This answer can't be shown: Codex withheld it."


class Presentation(NamedTuple):
    """How to present one answer: whether its text may be shown, and a note that
    follows it (or stands in its place); ``""`` for none."""

    answer: bool
    note: str = ""


AS_IS = Presentation(answer=True)


def presentation(item: codex_types.AgentMessageItem) -> Presentation:
    """What Codex's ``display`` of ``item`` asks for. An instruction the bridge cannot
    read never shows the answer, unless it says ``show``."""
    display = codex_types.answer_display(item)
    match display:
        case None:
            return AS_IS
        case codex_types.ShowDisplay(annotation=annotation):
            if annotation is not None and annotation.kind == "wellbeingHelpline":
                return Presentation(answer=True, note=HELPLINE_NOTE)
            if annotation is not None:
                log.info("answer %s: annotation %r not known, not shown", item.id, annotation.kind)
            return AS_IS
        case codex_types.HideDisplay(replacement=replacement):
            kind = replacement.kind if replacement is not None else ""
            return Presentation(answer=False, note=REPLACEMENT_NOTES.get(kind, HIDDEN_NOTE))
        case codex_types.BlockDisplay(reason=reason):
            kind = reason.kind if reason is not None else ""
            return Presentation(answer=False, note=BLOCK_NOTES.get(kind, WITHHELD_NOTE))
        case codex_types.LegacyDisplay(action=action, blockType=block_type):
            return _legacy(action, block_type)
        case codex_types.UnknownDisplay(mode=mode):
            if mode == "show":
                return AS_IS
            log.warning("answer %s: display mode %r not known: withheld", item.id, mode)
            return Presentation(answer=False, note=WITHHELD_NOTE)
    return Presentation(answer=False, note=WITHHELD_NOTE)  # pragma: no cover


def _legacy(action: str, block_type: str | None) -> Presentation:
    """Codex 0.169's ``{action, blockType?}``, read as its successor's modes."""
    if action == "show":
        return AS_IS
    if action == "hide":
        return Presentation(answer=False, note=HIDDEN_NOTE)
    note = BLOCK_NOTES.get(block_type or "", WITHHELD_NOTE) if action == "block" else WITHHELD_NOTE
    return Presentation(answer=False, note=note)


def answer_updates(
    item: codex_types.AgentMessageItem, *, streamed: bool
) -> list[acp_types.AgentMessageChunk]:
    """An answer at its completion, live and replayed alike (``streamed``: its text
    already went out as deltas; a replay has none). The text, if it may be shown and
    was not streamed, then the note, a paragraph of its own after anything shown."""
    shown = presentation(item)
    out = []
    text_sent = streamed
    if shown.answer and not streamed and item.text:
        out.append(_answer_chunk(item.id, item.text))
        text_sent = True
    if shown.note:
        out.append(_answer_chunk(item.id, ("\n\n" if text_sent else "") + shown.note))
    return out


def answer_upsert(item: codex_types.AgentMessageItem, *, streamed: bool) -> v2.AgentMessage | None:
    """An answer at its completion for ACP v2: one ``agent_message`` upsert under the
    item's id, whose content (the whole text as shown: the answer as Codex completed it,
    then the note; the note alone for an answer withheld) replaces what its chunks said.
    A client that missed a chunk, or was shown an answer Codex then withheld, ends up with
    what :func:`answer_updates` shows. ``None`` when there is nothing to show and nothing
    was streamed to correct."""
    shown = presentation(item)
    text = item.text if shown.answer else ""
    if shown.note:
        text = f"{text}\n\n{shown.note}" if text else shown.note
    if not text and not streamed:
        return None
    content = [acp_types.TextContent(text=text)] if text else []
    return v2.AgentMessage(messageId=item.id, content=content)


def _answer_chunk(item_id: str, text: str) -> acp_types.AgentMessageChunk:
    return acp_types.AgentMessageChunk(content=acp_types.TextContent(text=text), messageId=item_id)
