"""Reading what a test saw: the ``session/update`` payloads of a conversation, the entries of
a recording. The text updates say is read by :func:`bridge.acp.said.text_of`, also
the bridge's own client's reader."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from bridge.acp.said import text_of as text_of  # the one reader, re-exported
from bridge.jsonrpc.peer import ErrorObject
from bridge.recording.format import Entry, MessageRecord


def session_updates(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The params (``sessionId``, ``update``) of the ``session/update`` notifications among
    raw JSON-RPC ``messages``."""
    return [m["params"] for m in messages if m.get("method") == "session/update"]


def errors_of(messages: Iterable[Mapping[str, Any]]) -> list[ErrorObject]:
    """The errors among raw JSON-RPC ``messages``, decoded."""
    return [msgspec.convert(m["error"], ErrorObject) for m in messages if "error" in m]


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
