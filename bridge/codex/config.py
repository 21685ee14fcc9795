"""Codex app-server messages for a thread's settings, commands and the account.

``model/list`` (the model catalog), ``thread/settings/updated``,
``review/start``, ``thread/compact/start``, ``thread/shellCommand`` and the
``account/*`` login methods. Same conventions as :mod:`bridge.codex.types`.
Approval and sandbox policies stay plain JSON values (``Any``): Codex has
string and object variants and adds new ones; :mod:`bridge.engine.config`
reads the few it matches on.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from .types import Turn


class _Base(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


# -- the model catalog ------------------------------------------------------------------


class ModelListParams(_Base):
    cursor: str | UnsetType = UNSET


class ReasoningEffortOption(_Base):
    reasoningEffort: str
    description: str = ""


class Model(_Base):
    id: str
    #: The slug to send as ``model`` in ``turn/start``.
    model: str
    displayName: str = ""
    description: str = ""
    hidden: bool = False
    isDefault: bool = False
    supportedReasoningEfforts: list[ReasoningEffortOption] = msgspec.field(default_factory=list)
    defaultReasoningEffort: str | None = None


class ModelListResult(_Base):
    data: list[Model]
    nextCursor: str | None = None


# -- the thread's settings ----------------------------------------------------------------


class ThreadSettings(_Base):
    approvalPolicy: Any = UNSET
    sandboxPolicy: Any = UNSET
    model: str | UnsetType = UNSET
    effort: str | None | UnsetType = UNSET


class ThreadSettingsUpdated(_Base):
    """Codex's report of a thread's settings after they changed (e.g. a ``turn/start``
    carrying overrides): the truth the client is shown."""

    threadId: str
    threadSettings: ThreadSettings


# -- commands that start a turn of their own -------------------------------------------------


class UncommittedChangesTarget(_Base, tag="uncommittedChanges", tag_field="type"):
    pass


class CustomReviewTarget(_Base, tag="custom", tag_field="type"):
    instructions: str


class ReviewStartParams(_Base):
    threadId: str
    target: UncommittedChangesTarget | CustomReviewTarget


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


# -- the account -------------------------------------------------------------------------------


class ApiKeyLogin(_Base, tag="apiKey", tag_field="type"):
    apiKey: str


class ChatgptLogin(_Base, tag="chatgpt", tag_field="type"):
    pass


class LoginAccountResult(_Base):
    type: str
    #: ChatGPT: the page that signs the user in; Codex listens for its callback itself.
    authUrl: str | UnsetType = UNSET
    loginId: str | UnsetType = UNSET


class CancelLoginAccountParams(_Base):
    loginId: str


class AccountLoginCompleted(_Base):
    success: bool
    loginId: str | None = None
    error: str | None = None
