"""``session/load``, ``session/resume``, ``session/list``, ``session/close``, fork."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine


class Lifecycle:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
