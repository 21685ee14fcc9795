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


#: What ACP's ``Usage`` (a prompt's tokens) must count; the other counts are optional.
USAGE_COUNTS = ("totalTokens", "inputTokens", "outputTokens")


class Ended(dict[str, Any]):
    """How a test expects a prompt's work to end (v1's answer, v2's ``idle`` state): equal
    to what the bridge sent when that is these members plus, if any, the tokens the turn
    used (``usage``, which the real Codex counts differently on each run): a ``usage``
    must have ACP's counts, whole and not negative."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict):
            return NotImplemented
        rest = {k: v for k, v in other.items() if k != "usage"}
        if "usage" in other and "usage" not in self:
            usage = other["usage"]
            counted = isinstance(usage, dict) and all(
                isinstance(usage.get(name), int) and usage[name] >= 0 for name in USAGE_COUNTS
            )
            return counted and rest == dict(self)
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]


def calls_seen(
    updates: Iterable[dict[str, Any]], session_id: str, fields: Iterable[str] = ("title", "status")
) -> dict[str, dict[str, Any]]:
    """A session's tool calls as a client ends up seeing them from its ``session/update``
    params ``updates`` (later updates applied): each call's ``fields``, by its id."""
    calls: dict[str, dict[str, Any]] = {}
    for params in updates:
        update = params["update"]
        if params["sessionId"] == session_id and update["sessionUpdate"] in (
            "tool_call",
            "tool_call_update",
        ):
            calls.setdefault(update["toolCallId"], {}).update(
                {k: update[k] for k in fields if k in update}
            )
    return calls
