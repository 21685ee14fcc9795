"""Codex app-server messages the bridge reads and writes.

Hand-written from the schema Codex 0.169 generates
(``codex app-server generate-json-schema``; a copy is in ``tests/schemas/codex``),
for the members the bridge uses. Unknown fields are ignored; an item of a type
the bridge does not know decodes as :class:`UnknownItem` instead of failing,
because Codex adds item types between releases.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType


class _Base(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


# -- requests we send ------------------------------------------------------------


class ClientInfo(_Base):
    name: str
    version: str
    title: str | UnsetType = UNSET


class InitializeCapabilities(_Base):
    experimentalApi: bool = False


class InitializeParams(_Base):
    clientInfo: ClientInfo
    capabilities: InitializeCapabilities | UnsetType = UNSET


class InitializeResult(_Base):
    userAgent: str | UnsetType = UNSET


class ThreadStartParams(_Base):
    cwd: str | UnsetType = UNSET
    config: dict[str, Any] | UnsetType = UNSET
    model: str | UnsetType = UNSET
    approvalPolicy: Any = UNSET
    sandbox: Any = UNSET


class TextInput(_Base, tag="text", tag_field="type"):
    text: str


class ImageInput(_Base, tag="image", tag_field="type"):
    url: str


class LocalImageInput(_Base, tag="localImage", tag_field="type"):
    path: str


class SkillInput(_Base, tag="skill", tag_field="type"):
    """A skill the turn uses (a configured skill's slash command)."""

    name: str
    path: str


UserInput: TypeAlias = TextInput | ImageInput | LocalImageInput | SkillInput


class TurnStartParams(_Base):
    threadId: str
    input: list[UserInput]
    # Per-turn overrides that also stick for later turns (Codex's semantics):
    # what the user picked in the client, never what their config.toml says.
    approvalPolicy: Any = UNSET
    sandboxPolicy: Any = UNSET
    model: str | UnsetType = UNSET
    effort: str | UnsetType = UNSET


class TurnSteerParams(_Base):
    """``turn/steer``: add input to the running turn; refused unless ``expectedTurnId``
    is the thread's active turn."""

    threadId: str
    input: list[UserInput]
    expectedTurnId: str


class TurnSteerResult(_Base):
    turnId: str


class TurnInterruptParams(_Base):
    threadId: str
    turnId: str


# -- shared shapes -----------------------------------------------------------------


class TurnError(_Base):
    message: str
    additionalDetails: str | None = None
    codexErrorInfo: Any = None


TurnStatus: TypeAlias = Literal["completed", "interrupted", "failed", "inProgress"]


class Turn(_Base):
    id: str
    status: str  # TurnStatus; kept open so a new status does not break decoding
    error: TurnError | None = None
    items: list[Raw] = msgspec.field(default_factory=list)
    #: A sub-agent's turn: the turn of the root thread whose work it does.
    rootTurnId: str | None = None


class Thread(_Base):
    id: str
    cwd: str | UnsetType = UNSET
    parentThreadId: str | None = None
    agentNickname: str | None = None
    agentRole: str | None = None
    name: str | None = None
    preview: str | UnsetType = UNSET
    #: ``{type: notLoaded | idle | active | systemError, activeFlags?}``.
    status: dict[str, Any] | None = None


class ThreadStartResult(_Base):
    thread: Thread
    model: str | UnsetType = UNSET
    # The thread's settings as Codex resolved them (config.toml, profile, -c):
    # what the client is shown until the user picks. Resume and fork answer the same.
    approvalPolicy: Any = UNSET
    sandbox: Any = UNSET
    reasoningEffort: str | None | UnsetType = UNSET


# -- items --------------------------------------------------------------------------


class UserMessageItem(_Base, tag="userMessage", tag_field="type"):
    id: str
    content: list[dict[str, Any]] = msgspec.field(default_factory=list)


class AgentMessageItem(_Base, tag="agentMessage", tag_field="type"):
    id: str
    text: str = ""


class ReasoningItem(_Base, tag="reasoning", tag_field="type"):
    id: str
    summary: list[str] = msgspec.field(default_factory=list)
    content: list[str] = msgspec.field(default_factory=list)


KnownItem: TypeAlias = UserMessageItem | AgentMessageItem | ReasoningItem


class UnknownItem(msgspec.Struct):
    """An item whose type the bridge has no translation for yet."""

    type: str
    id: str
    raw: Raw


# -- notifications -------------------------------------------------------------------


class AgentMessageDelta(_Base):
    threadId: str
    turnId: str
    itemId: str
    delta: str


class ReasoningSummaryTextDelta(_Base):
    threadId: str
    turnId: str
    itemId: str
    delta: str
    summaryIndex: int = 0


class ReasoningSummaryPartAdded(_Base):
    threadId: str
    turnId: str
    itemId: str
    summaryIndex: int = 0


class ItemNotification(_Base):
    """``item/started`` and ``item/completed``."""

    threadId: str
    turnId: str
    item: Raw


class TurnNotification(_Base):
    """``turn/started`` and ``turn/completed``."""

    threadId: str
    turn: Turn


class ThreadStatus(_Base):
    type: str
    activeFlags: list[str] = msgspec.field(default_factory=list)


class ThreadStatusChanged(_Base):
    threadId: str
    status: ThreadStatus


class TokenUsageBreakdown(_Base):
    totalTokens: int
    inputTokens: int = 0
    cachedInputTokens: int = 0
    outputTokens: int = 0
    reasoningOutputTokens: int = 0


class ThreadTokenUsage(_Base):
    last: TokenUsageBreakdown
    total: TokenUsageBreakdown
    modelContextWindow: int | None = None


class ThreadTokenUsageUpdated(_Base):
    threadId: str
    turnId: str
    tokenUsage: ThreadTokenUsage


class ErrorNotification(_Base):
    threadId: str
    turnId: str
    error: TurnError
    willRetry: bool = False
