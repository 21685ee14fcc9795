"""What the engine asks the shell to do: send these bytes to that side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Merge:
    """How a ``session/update`` may merge with the one before it while the client is
    behind (see :mod:`bridge.engine.outbox`)."""

    session_id: str
    #: The stream it belongs to: its update kind and the message or tool call it is of.
    stream: tuple[str, str]
    #: The update itself, to build the merged message from.
    update: Any
    #: The text it appends to its stream; ``None``: it replaces the stream's last one.
    text: str | None


@dataclass(frozen=True, slots=True)
class ToClient:
    """One complete JSON-RPC message for the ACP client (one line on stdout)."""

    data: bytes
    #: The session a ``session/update`` is for (``None``: a response, a request...).
    session_id: str | None = None
    merge: Merge | None = None


@dataclass(frozen=True, slots=True)
class ToCodex:
    """One complete JSON-RPC message for Codex's app-server."""

    data: bytes


Effect = ToClient | ToCodex
