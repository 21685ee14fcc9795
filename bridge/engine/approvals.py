"""Codex's approval and question requests → ACP permission requests and elicitations."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine


class Approvals:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
