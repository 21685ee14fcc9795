"""Reading what a test saw: the ``session/update`` payloads of a conversation, the entries of
a recording."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bridge.recording.format import Entry, MessageRecord


def session_updates(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The params (``sessionId``, ``update``) of the ``session/update`` notifications among
    raw JSON-RPC ``messages``."""
    return [m["params"] for m in messages if m.get("method") == "session/update"]


def text_of(
    updates: Iterable[dict[str, Any]],
    kind: str = "agent_message_chunk",
    message_id: str | None = None,
) -> str:
    """The text of the chunks of ``kind`` (of message ``message_id``) among ``updates``
    (``session/update``'s ``update`` payloads), concatenated."""
    return "".join(
        u["content"].get("text", "")
        for u in updates
        if u["sessionUpdate"] == kind and (message_id is None or u.get("messageId") == message_id)
    )


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
