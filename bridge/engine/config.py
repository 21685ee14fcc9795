"""Modes, config options, slash commands, authentication, client MCP servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine


class Configuration:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
