"""Codex items and deltas → ACP session updates (pure functions)."""

from __future__ import annotations

from ..acp import types as acp_types
from ..codex import types as codex_types
from ..codex.messages import ThreadItem


def message_chunk(delta: codex_types.AgentMessageDelta) -> acp_types.AgentMessageChunk:
    return acp_types.AgentMessageChunk(
        content=acp_types.TextContent(text=delta.delta), messageId=delta.itemId
    )


def thought_chunk(item_id: str, text: str) -> acp_types.AgentThoughtChunk:
    return acp_types.AgentThoughtChunk(content=acp_types.TextContent(text=text), messageId=item_id)


def completed_item_updates(item: ThreadItem, streamed: bool) -> list[acp_types.SessionUpdate]:
    """Updates for an item's completion.

    Text that was streamed as deltas is not sent again; an item that arrives
    whole (no deltas, e.g. a short answer) is sent as one chunk.
    """
    if streamed:
        return []
    match item:
        case codex_types.AgentMessageItem(id=item_id, text=text) if text:
            return [
                acp_types.AgentMessageChunk(
                    content=acp_types.TextContent(text=text), messageId=item_id
                )
            ]
        case codex_types.ReasoningItem(id=item_id, summary=summary) if summary:
            return [thought_chunk(item_id, "\n\n".join(summary))]
    return []


def usage_update(usage: codex_types.ThreadTokenUsage) -> acp_types.UsageUpdate | None:
    """Context-window use; ``None`` when Codex does not know the window size.

    ``used`` is what the last model request put in the context window
    (``last.totalTokens``), not the thread's cumulative total: ACP asks for
    "tokens currently in context".
    """
    if usage.modelContextWindow is None:
        return None
    return acp_types.UsageUpdate(used=usage.last.totalTokens, size=usage.modelContextWindow)
