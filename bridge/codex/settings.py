"""Codex app-server messages for a thread's settings: ``model/list`` (the model
catalog), ``thread/settings/update`` and ``thread/settings/updated``, ``config/read``. Approval and sandbox policies stay plain
JSON values (``Any``): Codex has string and object variants and adds new ones;
:mod:`bridge.engine.features.settings.settings` reads the few it matches on. Same conventions as
:mod:`bridge.codex.types`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import Page, PageParams

# -- the model catalog ------------------------------------------------------------------


class ModelListParams(PageParams):
    pass


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
    #: What the model takes as input (``text``, ``image``, ...); ``None``: not said.
    inputModalities: list[str] | None = None


class ModelListResult(Page[Model]):
    pass


# -- the thread's settings ----------------------------------------------------------------


class ThreadSettings(_Base):
    approvalPolicy: Any = UNSET
    sandboxPolicy: Any = UNSET
    model: str | UnsetType = UNSET
    effort: str | None | UnsetType = UNSET
    approvalsReviewer: str | UnsetType = UNSET
    collaborationMode: Any = UNSET


class ThreadSettingsUpdateParams(_Base):
    """``thread/settings/update`` (experimental): change a thread's settings for its next
    turns, outside a turn, and store them in the thread. Unset members stay as they are;
    the answer is ``{}``, followed by ``thread/settings/updated``."""

    threadId: str
    approvalPolicy: Any = UNSET
    sandboxPolicy: Any = UNSET
    model: str | UnsetType = UNSET
    effort: str | UnsetType = UNSET
    #: ``{mode: "plan" | "default", settings: {model, reasoning_effort, developer_instructions}}``
    collaborationMode: Any = UNSET
    #: ``user`` | ``auto_review``: who answers the thread's approvals.
    approvalsReviewer: str | UnsetType = UNSET


class ThreadSettingsUpdated(_Base):
    """Codex's report of a thread's settings after they changed (e.g. a ``turn/start``
    carrying overrides): the truth the client is shown."""

    threadId: str
    threadSettings: ThreadSettings


# -- the configuration Codex resolves ---------------------------------------------------------


class ConfigReadParams(_Base):
    """``config/read``: the configuration Codex resolves for ``cwd`` (``config.toml``, the
    project's, the profile), as ``thread/start`` resolves it."""

    cwd: str | UnsetType = UNSET


class ConfigReadResult(_Base):
    #: ``config.toml``'s keys as Codex resolved them (``approval_policy``, ``sandbox_mode``,
    #: ``sandbox_workspace_write``, ``model``, ...).
    config: dict[str, Any] = msgspec.field(default_factory=dict)
