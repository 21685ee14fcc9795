"""Codex app-server requests that start a turn of their own: ``review/start``,
``thread/compact/start``, ``thread/shellCommand``. Same conventions as
:mod:`bridge.codex.types`.
"""

from __future__ import annotations

from ..wire import WireStruct as _Base
from .types import Turn

# -- commands that start a turn of their own -------------------------------------------------


class UncommittedChangesTarget(_Base, tag="uncommittedChanges", tag_field="type"):
    pass


class CustomReviewTarget(_Base, tag="custom", tag_field="type"):
    instructions: str


class BaseBranchTarget(_Base, tag="baseBranch", tag_field="type"):
    branch: str


class CommitTarget(_Base, tag="commit", tag_field="type"):
    sha: str


ReviewTarget = UncommittedChangesTarget | CustomReviewTarget | BaseBranchTarget | CommitTarget


class ReviewStartParams(_Base):
    threadId: str
    target: ReviewTarget


class ThreadCompactStartParams(_Base):
    threadId: str


class ThreadShellCommandParams(_Base):
    threadId: str
    command: str


class CommandStartResult(_Base):
    """The answer to a request that starts a turn. ``turn/start`` and ``review/start``
    name the turn; ``thread/compact/start`` and ``thread/shellCommand`` answer ``{}``,
    and their turn is named by the ``turn/started`` that follows."""

    turn: Turn | None = None
