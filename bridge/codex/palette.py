"""Codex app-server requests behind the slash commands that answer without a turn:
``account/read``, ``account/rateLimits/read``, ``mcpServerStatus/list``, ``skills/list``,
``thread/goal/get|set|clear``, ``thread/name/set``, ``account/logout``. Results keep only
what the bridge shows; everything else Codex sends is ignored. Same conventions as
:mod:`bridge.codex.types`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import Page, PageParams


class NoParams(_Base):
    pass


class Empty(_Base):
    """An answer whose members the bridge does not read (``{}`` and the like)."""


# -- /status -------------------------------------------------------------------------------


class Account(_Base):
    """Codex's ``Account``: one shape for its kinds (``apiKey``; ``chatgpt`` with ``email``,
    ``planType``, ``workspaceName``; ``amazonBedrock``; ``gcp``; any later one), each member
    the bridge reads optional, so a kind it does not know decodes too."""

    type: str
    email: str | None = None
    planType: str | None = None
    workspaceName: str | None = None


class AccountReadResult(_Base):
    #: ``None``: signed out (or a provider that needs no OpenAI account).
    account: Account | None = None
    requiresOpenaiAuth: bool = False


class RateLimitWindow(_Base, omit_defaults=False):
    """One usage window; the rate-limits extension (:mod:`bridge.acp.rate_limits`) sends it
    to the client in this very shape, every member present (``null`` when unknown)."""

    usedPercent: float
    windowDurationMins: int | None = None
    resetsAt: int | None = None


class RateLimitSnapshot(_Base, omit_defaults=False):
    """One limit's windows. The rate-limits extension sends the merged picture in this shape
    (members in this order, ``limitId`` always set, ``null`` for what is unknown)."""

    #: ``"codex"`` for the account's ordinary limit; a model's own limit has another.
    limitId: str | None = None
    limitName: str | None = None
    normalModelSlug: str | None = None
    primary: RateLimitWindow | None = None
    secondary: RateLimitWindow | None = None
    #: Set while Codex's backend refuses turns on this limit (``rate_limit_reached``, ...).
    rateLimitReachedType: str | None = None
    planType: str | None = None


class RateLimitsUpdated(_Base):
    """``account/rateLimits/updated``: sparse, merged into the last snapshot of its limit."""

    rateLimits: RateLimitSnapshot


class RateLimitsResult(_Base):
    rateLimits: RateLimitSnapshot | None = None
    #: Every limit, by ``limitId`` (``rateLimits`` is the ordinary one).
    rateLimitsByLimitId: dict[str, RateLimitSnapshot] | None = None


# -- /mcp ------------------------------------------------------------------------------------


class McpServerStatusListParams(PageParams):
    threadId: str | UnsetType = UNSET
    #: One server only (with ``threadId``: that thread's connection to it).
    serverName: str | UnsetType = UNSET
    #: ``toolsAndAuthOnly``: no resources read (``full`` when absent).
    detail: str | UnsetType = UNSET


class McpServerStatus(_Base):
    name: str
    authStatus: str = "unknown"
    runtimeStatus: str | None = None
    tools: dict[str, Any] = msgspec.field(default_factory=dict)
    toolsError: str | None = None


class McpServerStatusListResult(Page[McpServerStatus]):
    pass


# -- /skills ---------------------------------------------------------------------------------


class SkillsListParams(_Base):
    cwds: list[str]


class Skill(_Base):
    name: str
    description: str = ""
    enabled: bool = True
    path: str = ""
    scope: str = ""


class SkillsListEntry(_Base):
    cwd: str = ""
    skills: list[Skill] = msgspec.field(default_factory=list)


class SkillsListResult(_Base):
    data: list[SkillsListEntry]


# -- /goal, /rename --------------------------------------------------------------------------


class ThreadGoal(_Base):
    objective: str
    status: str
    tokensUsed: int = 0
    timeUsedSeconds: int = 0
    tokenBudget: int | None = None


class ThreadGoalParams(_Base):
    """``thread/goal/get`` and ``thread/goal/clear``."""

    threadId: str


class ThreadGoalSetParams(ThreadGoalParams):
    """``thread/goal/set``: what changes of the thread's goal."""

    objective: str | UnsetType = UNSET
    status: str | UnsetType = UNSET


class ThreadGoalResult(_Base):
    goal: ThreadGoal | None = None


class ThreadSetNameParams(_Base):
    threadId: str
    name: str
