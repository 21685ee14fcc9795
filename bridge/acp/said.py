"""What a session's updates say: the text of its chunks and messages, read through the wire
types (one reader, for the bridge's own client and for the tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import msgspec
from msgspec import UNSET

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
from .v2 import AgentMessage, UserMessage

#: The updates that say something: a streamed chunk carries one content block; a message
#: between sessions, and a v2 user or agent message, a list of them.
Said: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | SessionMessage
    | UserMessage
    | AgentMessage
)
SAID_KINDS = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "session_message",
        "user_message",
        "agent_message",
    }
)
#: The upsert that replaces what the chunks of one kind said of its message (ACP v2).
UPSERTS = {"agent_message_chunk": "agent_message"}


_SAID = msgspec.json.Decoder(Said)


def text_of(
    updates: Iterable[Mapping[str, Any]],
    kind: str = "agent_message_chunk",
    message_id: str | None = None,
) -> str:
    """The text the ``kind`` updates (of message ``message_id``) among ``updates``
    (``session/update``'s ``update`` payloads) say, concatenated. Every update of ``kind``
    is decoded as its wire Struct, so a malformed one raises ``msgspec.ValidationError``;
    blocks other than text say nothing. ACP v2's ``agent_message`` upsert replaces what
    the chunks of its message said so far (in the place of the message's first chunk),
    as a client shows it."""
    if kind not in SAID_KINDS:
        raise ValueError(f"{kind} says nothing")
    upsert = UPSERTS.get(kind)
    # Through JSON, not msgspec.convert: a v2 message keeps its blocks as raw JSON.
    said = [
        _SAID.decode(msgspec.json.encode(u))
        for u in updates
        if u["sessionUpdate"] == kind or u["sessionUpdate"] == upsert
    ]
    pieces: list[tuple[str | None, str]] = []  # (its message, the text), in order
    for update in said:
        if message_id is not None and update.messageId != message_id:
            continue
        text = "".join(b.text for b in _blocks(update) if isinstance(b, TextContent))
        if not isinstance(update, AgentMessage):
            pieces.append((update.messageId if isinstance(update.messageId, str) else None, text))
            continue
        if update.content is UNSET:
            continue  # the upsert leaves the content as it was
        at = [n for n, (m, _) in enumerate(pieces) if m == update.messageId]
        if not at:
            pieces.append((update.messageId, text))
            continue
        pieces[at[0]] = (update.messageId, text)
        for n in reversed(at[1:]):
            del pieces[n]
    return "".join(text for _, text in pieces)


def _blocks(update: Said) -> list[ContentBlock | UnknownContent]:
    if isinstance(update, SessionMessage):
        return list(update.content) if isinstance(update.content, list) else []
    if isinstance(update, UserMessage):
        raws = update.content if isinstance(update.content, list) else []
        return [decode_content_block(raw) for raw in raws]
    if isinstance(update, AgentMessage):
        blocks = update.content if isinstance(update.content, list) else []
        return [decode_content_block(msgspec.json.encode(block)) for block in blocks]
    return [update.content]
