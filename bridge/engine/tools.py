"""Tool items → ACP ``tool_call`` / ``tool_call_update``; plans, thread names."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from msgspec import Raw

if TYPE_CHECKING:
    from .engine import Engine


class Tools:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine


def history_updates(item: Raw) -> list[msgspec.Struct]:
    """The updates that show a finished tool item in a replayed history (``session/load``).

    Empty for items that are not tools (messages, reasoning, user input).
    """
    return []
