"""State tables: a move a table does not list is a defect of the caller, and raises.

The engine keeps a few states as enums with the moves allowed between them (Codex's side of
the connection, :mod:`bridge.engine.core.codex_side`; a turn and its interrupt,
:mod:`bridge.engine.core.turns`). Each table maps a state to the states it may go to; the one
writer of each state moves it through :func:`checked`, so an impossible move fails where it is
made rather than showing later as a state nobody expected.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

S = TypeVar("S", bound=enum.Enum)


class ImpossibleMove(RuntimeError):
    """A move the table does not have: a defect of the caller."""


def checked(table: Mapping[S, frozenset[S]], now: S, to: S, what: str) -> S:
    """``to``, when ``table`` allows the move from ``now``; otherwise :class:`ImpossibleMove`
    naming ``what`` moved."""
    if to not in table[now]:
        raise ImpossibleMove(f"{what} cannot go from {now.name} to {to.name}")
    return to
