"""A ``session/fork`` under way (:class:`Fork`), and which turn of a stored thread holds the
message a fork point names (pure).

A message is a Codex item: a user message or an agent message, its id the ``messageId``
the client was shown. An id with a ``:segment:<n>`` suffix names the same message. When
no item has the id, the ``occurrence``-th agent message whose text's SHA-256 is the
fingerprint is the one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from ....acp.air import ForkPoint
from ....codex.types import Turn
from ....jsonrpc import RequestId
from ...core.hub import StoredSessionParams
from ...core.record_parts import LeftOut


@dataclass(frozen=True, slots=True)
class Fork:
    """A ``session/fork`` under way: what the client asked, checked."""

    rid: RequestId
    params: StoredSessionParams
    at: ForkPoint | None
    folders: tuple[str, ...]
    config: dict[str, Any] | None
    left_out: tuple[LeftOut, ...]
    #: Not empty once the client cancelled the request (``$/cancel_request``).
    cancelled: list[bool]


# Compiled at first use (the re module caches it), not at import.
_SEGMENT = r":segment:\d+$"
_MESSAGES = ("userMessage", "agentMessage")


def _items(turn: Turn) -> list[dict[str, Any]]:
    items = []
    for raw in turn.items:
        try:
            item = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        if isinstance(item, dict) and item.get("type") in _MESSAGES:
            items.append(item)
    return items


def turn_holding(point: ForkPoint, turns: list[Turn]) -> str | None:
    """The id of the turn that holds the message, or ``None`` when no message matches."""
    wanted = re.sub(_SEGMENT, "", point.message_id)
    for turn in turns:
        for item in _items(turn):
            if item.get("id") in (point.message_id, wanted):
                return turn.id
    if point.fingerprint is None:
        return None
    # Here, not at the top: hashlib loads OpenSSL (~3 ms), and only a fork by fingerprint
    # needs it; the engine's start does not.
    import hashlib

    seen = 0
    for turn in turns:
        for item in _items(turn):
            text = item.get("text")
            if item.get("type") != "agentMessage" or not isinstance(text, str):
                continue
            digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
            if digest == point.fingerprint:
                seen += 1
                if seen == point.occurrence:
                    return turn.id
    return None
