"""Where Codex's side of the connection is: one state and, while Codex is away, why.

Kept once, on the hub (``hub.codex.side``), so that a feature asking "is Codex there?" and the
connection moving it cannot disagree. :mod:`bridge.engine.core.connection` is its one writer,
through :meth:`CodexSide.move`, which refuses a move its table (:data:`MOVES`, the one in
connection's docstring) does not have; the rest read ``hub.codex.ready`` and
``hub.codex.lost_reason``, which are this state seen two ways.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .moves import ImpossibleMove, checked

__all__ = ["AWAY", "MOVES", "CodexSide", "CodexState", "ImpossibleMove"]


class CodexState(enum.Enum):
    """Where Codex's side of the connection is (see :mod:`bridge.engine.core.connection`)."""

    STARTING = "starting"
    READY = "ready"
    RECOVERING = "recovering"
    RESTARTING = "restarting"
    LOST = "lost"


#: Every move the connection makes, from → to. LOST → LOST: lost for good, then the shell
#: says it gave up (its reason is the last word).
MOVES: dict[CodexState, frozenset[CodexState]] = {
    CodexState.STARTING: frozenset({CodexState.READY, CodexState.LOST, CodexState.RECOVERING}),
    CodexState.READY: frozenset({CodexState.RECOVERING, CodexState.LOST}),
    CodexState.RECOVERING: frozenset({CodexState.RESTARTING, CodexState.LOST}),
    CodexState.RESTARTING: frozenset({CodexState.READY, CodexState.LOST, CodexState.RECOVERING}),
    CodexState.LOST: frozenset({CodexState.RESTARTING, CodexState.LOST}),
}

#: The states in which Codex is away, with a reason.
AWAY = frozenset({CodexState.RECOVERING, CodexState.LOST})


@dataclass(slots=True)
class CodexSide:
    state: CodexState = CodexState.STARTING
    #: Why Codex is away (RECOVERING, LOST); ``None`` otherwise.
    reason: str | None = None

    def move(self, to: CodexState, reason: str | None = None) -> None:
        """To ``to``; a state of :data:`AWAY` needs its ``reason``, the others have none."""
        checked(MOVES, self.state, to, "Codex's side")
        if (to in AWAY) != (reason is not None):
            raise ImpossibleMove(f"{to.name} with the reason {reason!r}")
        self.state, self.reason = to, reason
