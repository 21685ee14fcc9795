"""What one feature asks of another's object, where more than one feature asks it: the
protocols the wiring's objects meet (a feature imports no other feature)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ...jsonrpc.peer import ErrorObject
from .threads import ThreadRecord

Done = Callable[[], None]


class Collaboration(Protocol):
    """The session's collaboration mode (:mod:`bridge.engine.features.settings.settings`)."""

    def set_collaboration(
        self, record: ThreadRecord, mode: str, done: Done, failed: Callable[[ErrorObject], None]
    ) -> bool:
        """Store Codex's collaboration mode in the thread (``False``: no settings)."""
