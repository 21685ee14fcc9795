"""What the engine asks the shell to do: send these bytes to that side."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToClient:
    """One complete JSON-RPC message for the ACP client (one line on stdout)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class ToCodex:
    """One complete JSON-RPC message for Codex's app-server."""

    data: bytes


Effect = ToClient | ToCodex
