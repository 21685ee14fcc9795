"""Reading what a test saw: the ``session/update`` payloads of a conversation, the entries of
a recording."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import msgspec

from bridge.acp.subagents import SessionMessage
from bridge.acp.types import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentBlock,
    TextContent,
    UnknownContent,
    UserMessageChunk,
    decode_content_block,
)
from bridge.acp.v2 import UserMessage
from bridge.jsonrpc.peer import ErrorObject
from bridge.recording.format import Entry, MessageRecord


def session_updates(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The params (``sessionId``, ``update``) of the ``session/update`` notifications among
    raw JSON-RPC ``messages``."""
    return [m["params"] for m in messages if m.get("method") == "session/update"]


#: The updates that say something: a streamed chunk carries one content block; a message
#: between sessions, and a v2 user message, a list of them.
Said: TypeAlias = (
    AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | SessionMessage | UserMessage
)
_SAID_KINDS = {
    "agent_message_chunk",
    "agent_thought_chunk",
    "user_message_chunk",
    "session_message",
    "user_message",
}


def errors_of(messages: Iterable[Mapping[str, Any]]) -> list[ErrorObject]:
    """The errors among raw JSON-RPC ``messages``, decoded."""
    return [msgspec.convert(m["error"], ErrorObject) for m in messages if "error" in m]


def text_of(
    updates: Iterable[Mapping[str, Any]],
    kind: str = "agent_message_chunk",
    message_id: str | None = None,
) -> str:
    """The text the ``kind`` updates (of message ``message_id``) among ``updates``
    (``session/update``'s ``update`` payloads) say, concatenated. Every update of ``kind``
    is decoded as its wire Struct, so one that is malformed fails the test; blocks other than
    text say nothing."""
    assert kind in _SAID_KINDS, f"{kind} says nothing"
    said = [
        msgspec.json.decode(msgspec.json.encode(u), type=Said)
        for u in updates
        if u["sessionUpdate"] == kind
    ]
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


def states_of(updates: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``state_update`` payloads among ``updates``, without their ``sessionUpdate`` tag."""
    return [
        {k: v for k, v in u.items() if k != "sessionUpdate"}
        for u in updates
        if u["sessionUpdate"] == "state_update"
    ]


def direction(entry: Entry) -> str | None:
    """Which way a recording's entry went (``from_client``, ``to_codex``, ...); ``None`` for
    an event."""
    return entry.record.dir if isinstance(entry.record, MessageRecord) else None
