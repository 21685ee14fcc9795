"""Codex items and deltas → ACP session updates (pure functions)."""

from __future__ import annotations

from ..acp import types as acp
from ..codex import types as codex
from ..codex.messages import ThreadItem


def message_chunk(delta: codex.AgentMessageDelta) -> acp.AgentMessageChunk:
    return acp.AgentMessageChunk(content=acp.TextContent(text=delta.delta), messageId=delta.itemId)


def thought_chunk(item_id: str, text: str) -> acp.AgentThoughtChunk:
    return acp.AgentThoughtChunk(content=acp.TextContent(text=text), messageId=item_id)


def completed_item_updates(item: ThreadItem, streamed: bool) -> list[acp.SessionUpdate]:
    """Updates for an item's completion.

    Text that was streamed as deltas is not sent again; an item that arrives
    whole (no deltas, e.g. a short answer) is sent as one chunk.
    """
    if streamed:
        return []
    match item:
        case codex.AgentMessageItem(id=item_id, text=text) if text:
            return [acp.AgentMessageChunk(content=acp.TextContent(text=text), messageId=item_id)]
        case codex.ReasoningItem(id=item_id, summary=summary) if summary:
            return [thought_chunk(item_id, "\n\n".join(summary))]
    return []


def usage_update(usage: codex.ThreadTokenUsage) -> acp.UsageUpdate | None:
    """Context-window use; ``None`` when Codex does not know the window size.

    ``used`` is what the last model request put in the context window
    (``last.totalTokens``), not the thread's cumulative total: ACP asks for
    "tokens currently in context".
    """
    if usage.modelContextWindow is None:
        return None
    return acp.UsageUpdate(used=usage.last.totalTokens, size=usage.modelContextWindow)
