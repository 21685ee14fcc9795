"""Codex app-server messages the bridge reads and writes.

Hand-written from the schema Codex 0.169 generates
(``codex app-server generate-json-schema``; a copy is in ``tests/schemas/codex``),
for the members the bridge uses. Unknown fields are ignored; an item of a type
the bridge does not know decodes as :class:`UnknownItem` instead of failing,
because Codex adds item types between releases.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..wire import WireStruct as _Base
from ..wire import lazy_decoder

_Entry = TypeVar("_Entry")


class Page(_Base, Generic[_Entry]):
    """A page of a ``.../list`` result: ``nextCursor`` asks for the next, ``None`` at the end."""

    data: list[_Entry]
    nextCursor: str | None = None


class PageParams(_Base, kw_only=True):
    """What every ``.../list`` request takes: the ``nextCursor`` of the page before (none for
    the first) and, where Codex lets the caller choose, how many entries a page holds.
    Keyword-only, so they follow what the request names first (msgspec's order)."""

    cursor: str | UnsetType = UNSET
    limit: int | UnsetType = UNSET


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
    #: A configured provider for this thread (else Codex's default, from config.toml).
    modelProvider: str | UnsetType = UNSET
    approvalPolicy: Any = UNSET
    sandbox: Any = UNSET
    #: Where the thread acts (experimental); without it, every registered environment.
    environments: list[TurnEnvironment] | UnsetType = UNSET
    #: The thread's folders, ``cwd`` first (experimental): writable under workspace-write
    #: as ``cwd`` is, kept in the thread and replaced by the next list sent.
    runtimeWorkspaceRoots: list[str] | UnsetType = UNSET


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
    #: Where the turn (and the ones after it) acts: ``[{environmentId, cwd}]``
    #: (experimental; ``local`` is the app-server's own machine).
    #: Who answers this turn's approvals and the next turns' (``user``, ``auto_review``).
    approvalsReviewer: str | UnsetType = UNSET
    #: ``{mode, settings}``: the collaboration mode for this turn and the next.
    collaborationMode: Any = UNSET
    environments: list[TurnEnvironment] | UnsetType = UNSET
    #: The thread's folders from this turn on (experimental; see ``ThreadStartParams``).
    runtimeWorkspaceRoots: list[str] | UnsetType = UNSET


class TurnEnvironment(_Base):
    """One environment a turn acts in (``TurnEnvironmentParams``; a thread answers with
    the same, ``ThreadEnvironment``)."""

    environmentId: str
    cwd: str = ""
    #: The environment's folders (left out: its ``cwd`` alone).
    runtimeWorkspaceRoots: list[str] | UnsetType = UNSET


class EnvironmentAddParams(_Base):
    """``environment/add`` (experimental): a remote exec-server Codex may act through.
    The bearer token goes only to a loopback URL (Codex refuses it elsewhere without TLS)."""

    environmentId: str
    execServerUrl: str
    authBearerToken: str | UnsetType = UNSET


class EnvironmentConnection(_Base):
    """``thread/environment/connected`` and ``.../disconnected``."""

    threadId: str
    environmentId: str


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


class CurrentTimeReadParams(_Base):
    """``currentTime/read`` (experimental, 0.169; gone in 0.171): Codex asks its client
    for the time."""

    threadId: str = ""


class CurrentTimeReadResult(_Base):
    #: Whole Unix seconds.
    currentTimeAt: int


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
    #: Unix seconds, once the turn ended (``turn/completed``).
    completedAt: int | None = None


class Thread(_Base):
    """A thread as Codex describes it: in ``thread/start``'s, ``thread/resume``'s and
    ``thread/fork``'s answers, ``thread/started``, ``thread/read`` and ``thread/list``."""

    id: str
    cwd: str = ""
    #: The title a person gave (or Codex generated); ``None`` until there is one.
    name: str | None = None
    #: Usually the first user message.
    preview: str = ""
    #: Unix seconds.
    updatedAt: int | None = None
    #: Unix seconds: when a turn last started (Codex orders its list by it).
    recencyAt: int | None = None
    #: The thread this one was forked from.
    forkedFromId: str | None = None
    parentThreadId: str | None = None
    #: A sub-agent's name and role, as Codex shows them.
    agentNickname: str | None = None
    agentRole: str | None = None
    #: ``"vscode"``, ``"cli"``, ... or ``{"subAgent": {...}}`` for a sub-agent.
    source: Any = None
    #: Filled by ``thread/read {includeTurns: true}`` only.
    turns: list[Turn] = msgspec.field(default_factory=list)
    #: ``{"type": "idle" | "active" | "notLoaded" | "systemError", ...}``.
    status: dict[str, Any] | None = None
    #: The model and reasoning effort the thread runs with.
    model: str | None = None
    reasoningEffort: str | None = None
    #: Kept in memory only, never stored (Codex's TUI titles a new thread in one).
    ephemeral: bool = False
    #: Where the thread acts (experimental; absent before 0.171): its sticky environments.
    environments: list[TurnEnvironment] | None = None


class ThreadStartResult(_Base):
    thread: Thread
    model: str | UnsetType = UNSET
    #: The provider the thread runs on (``openai`` for OpenAI's own).
    modelProvider: str | UnsetType = UNSET
    # The thread's settings as Codex resolved them (config.toml, profile, -c):
    # what the client is shown until the user picks. Resume and fork answer the same.
    approvalPolicy: Any = UNSET
    sandbox: Any = UNSET
    reasoningEffort: str | None | UnsetType = UNSET
    #: Who answers the thread's approvals: ``user``, or ``auto_review`` (Codex's reviewer).
    approvalsReviewer: str | None | UnsetType = UNSET
    #: ``{mode: "plan" | "default", settings}`` (resume only: Codex's effective mode).
    collaborationMode: Any = UNSET
    #: The thread's folders (experimental; ``cwd`` first), as Codex keeps them.
    runtimeWorkspaceRoots: list[str] | UnsetType = UNSET


# -- items --------------------------------------------------------------------------


class UserMessageItem(_Base, tag="userMessage", tag_field="type"):
    id: str
    content: list[dict[str, Any]] = msgspec.field(default_factory=list)


_NULL = Raw(b"null")


class AgentMessageModeration(_Base):
    """``moderation`` of an answer: whether it was moderated, and how to present it.

    ``display`` is kept raw and read by :func:`decode_display`: its shape changed
    between 0.169 and 0.171 and will again, and a shape the bridge does not know
    must not make the answer undecodable (it is then withheld, never shown)."""

    moderated: bool = False
    #: ``null`` when Codex gives no instruction.
    display: Raw = _NULL


class AgentMessageItem(_Base, tag="agentMessage", tag_field="type"):
    id: str
    text: str = ""
    moderation: AgentMessageModeration | None = None
    #: ``commentary``, ``partial_answer``, ``final_answer``; ``None`` when the model says none.
    phase: str | None = None


class ReasoningItem(_Base, tag="reasoning", tag_field="type"):
    id: str
    summary: list[str] = msgspec.field(default_factory=list)
    content: list[str] = msgspec.field(default_factory=list)


class PlanItem(_Base, tag="plan", tag_field="type"):
    """Plan mode's proposed plan (experimental), Markdown: Codex takes it out of the model's
    answer (its ``<proposed_plan>`` block). ``item/plan/delta`` streams it; the completed
    item is the whole plan, and Codex says the deltas may not add up to it."""

    id: str
    text: str = ""


KnownItem: TypeAlias = UserMessageItem | AgentMessageItem | ReasoningItem | PlanItem


# -- how an answer is presented (``AgentMessageDisplay``) -------------------------------
# 0.171: a union tagged by ``mode``, versioned; its members (annotation, replacement,
# reason) are unions tagged by ``kind``, read here as loose structs so that a new kind
# still decodes. 0.169: one object with an open ``action``.


class AnswerAnnotation(_Base):
    """What to show after the answer: ``wellbeingHelpline`` (``subject``: ``answer`` |
    ``prompt``, what the helpline is about)."""

    kind: str = ""
    subject: str | None = None


class AnswerReplacement(_Base):
    """What to show instead of the answer: ``wellbeingPromptHelpline``."""

    kind: str = ""


class BlockReason(_Base):
    """Why an answer is blocked: ``protection`` (``protectionType``: Codex's id of the
    moderation record, nothing to show a user) or ``cyber`` (``trustedAccess``)."""

    kind: str = ""
    protectionType: str | None = None
    trustedAccess: bool | None = None


class ShowDisplay(_Base, tag="show", tag_field="mode"):
    version: int = 1
    #: ``check`` | ``skip``.
    trustedContacts: str = ""
    annotation: AnswerAnnotation | None = None


class HideDisplay(_Base, tag="hide", tag_field="mode"):
    version: int = 1
    replacement: AnswerReplacement | None = None


class BlockDisplay(_Base, tag="block", tag_field="mode"):
    version: int = 1
    reason: BlockReason | None = None


class LegacyDisplay(_Base):
    """Codex 0.169's shape: ``action`` is open ("unknown actions must be left for the
    producing client to handle")."""

    action: str
    blockType: str | None = None
    checkTrustedContacts: bool | None = None
    cyberTrustedAccess: bool | None = None


class UnknownDisplay(msgspec.Struct):
    """A display the bridge cannot read: a new ``mode``, or a known one whose members do
    not fit. ``mode`` is ``""`` when it has none (or not a string)."""

    mode: str
    raw: Raw


AnswerDisplay: TypeAlias = ShowDisplay | HideDisplay | BlockDisplay | LegacyDisplay | UnknownDisplay

_DISPLAY = lazy_decoder(ShowDisplay | HideDisplay | BlockDisplay)
_LEGACY_DISPLAY = lazy_decoder(LegacyDisplay)


class _DisplayTag(msgspec.Struct):
    mode: Any = None
    action: Any = None


_DISPLAY_TAG = msgspec.json.Decoder(_DisplayTag)


def decode_display(raw: Raw) -> AnswerDisplay:
    """An answer's ``moderation.display``, whatever its shape; never raises."""
    try:
        tag = _DISPLAY_TAG.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return UnknownDisplay("", raw)
    decoder: msgspec.json.Decoder[Any] = (
        _DISPLAY() if tag.mode is not None or tag.action is None else _LEGACY_DISPLAY()
    )
    try:
        display: AnswerDisplay = decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return UnknownDisplay(tag.mode if isinstance(tag.mode, str) else "", raw)
    return display


def answer_display(item: AgentMessageItem) -> AnswerDisplay | None:
    """How Codex says ``item`` is to be presented (``None``: as it is)."""
    moderation = item.moderation
    if moderation is None or bytes(moderation.display) == b"null":
        return None
    return decode_display(moderation.display)


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


class TurnDiffUpdated(_Base):
    """``turn/diff/updated``: the turn's changes so far, one Git diff (paths relative to
    the repository Codex found above the thread's ``cwd``)."""

    threadId: str
    turnId: str
    diff: str = ""


class ThreadStarted(_Base):
    """``thread/started``: sent to every connection, whoever started the thread."""

    thread: Thread


class TokenUsageBreakdown(_Base):
    totalTokens: int
    inputTokens: int = 0
    cachedInputTokens: int = 0
    outputTokens: int = 0
    reasoningOutputTokens: int = 0
    #: Codex 0.171 (not 0.169).
    cacheWriteInputTokens: int | None = None


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
