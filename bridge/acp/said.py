"""What a session's updates say: the text of its chunks and messages, read through the wire
types (one reader, for the bridge's own client and for the tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import msgspec

from .subagents import SessionMessage
from .types import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentBlock,
    TextContent,
    UnknownContent,
    UserMessageChunk,
    decode_content_block,
)
from .v2 import UserMessage

#: The updates that say something: a streamed chunk carries one content block; a message
#: between sessions, and a v2 user message, a list of them.
Said: TypeAlias = (
    AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | SessionMessage | UserMessage
)
SAID_KINDS = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "session_message",
        "user_message",
    }
)


_SAID = msgspec.json.Decoder(Said)


def text_of(
    updates: Iterable[Mapping[str, Any]],
    kind: str = "agent_message_chunk",
    message_id: str | None = None,
) -> str:
    """The text the ``kind`` updates (of message ``message_id``) among ``updates``
    (``session/update``'s ``update`` payloads) say, concatenated. Every update of ``kind``
    is decoded as its wire Struct, so a malformed one raises ``msgspec.ValidationError``;
    blocks other than text say nothing."""
    if kind not in SAID_KINDS:
        raise ValueError(f"{kind} says nothing")
    # Through JSON, not msgspec.convert: a v2 user message keeps its blocks as raw JSON.
    said = [_SAID.decode(msgspec.json.encode(u)) for u in updates if u["sessionUpdate"] == kind]
    return "".join(
        block.text
        for update in said
        if message_id is None or update.messageId == message_id
        for block in _blocks(update)
        if isinstance(block, TextContent)
    )


def _blocks(update: Said) -> list[ContentBlock | UnknownContent]:
    if isinstance(update, SessionMessage):
        return list(update.content) if isinstance(update.content, list) else []
    if isinstance(update, UserMessage):
        raws = update.content if isinstance(update.content, list) else []
        return [decode_content_block(raw) for raw in raws]
    return [update.content]
