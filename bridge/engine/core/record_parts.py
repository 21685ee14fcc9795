"""The parts of a thread's record (:class:`~bridge.engine.core.threads.ThreadRecord`): its
turn in flight and what that turn is (:class:`TurnKind`), prompts waiting for it, questions
and tool calls in progress, its settings, messages held while its place is not known, its
work state (:class:`Status`), a steer under way; and the parts one feature owns
(:class:`Stream`, :class:`Shown`, :class:`McpNotes`, :class:`ToolCalls`,
:class:`SessionLife`, :class:`Placing`, :class:`Work`), which only that feature writes, the others telling
it what happened through the part's methods (``tests/test_architecture.py``'s
``RECORD_PART_WRITERS``; ``docs/architecture.md`` lists who changes what)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec
from msgspec import Raw

from ...codex import items
from ...codex import types as codex_types
from ...jsonrpc import RequestId, RpcError


class TurnKind(enum.Enum):
    """Who a turn is for (:mod:`bridge.engine.core.turns`, which fixes it as the turn begins)."""

    #: A ``session/prompt`` of this client's: its request waits for the turn to end.
    PROMPT = "prompt"
    #: A steer on an idle session (``startedNewTurn``): no prompt request waits for the
    #: turn, but it is the session's turn all the same.
    STEER = "steer"
    #: A slash command answered without a turn (``/goal``, ``/rename``...): the turn is the
    #: command's own. It never takes a turn Codex starts on its own meanwhile (a resumed
    #: goal's): that one is not its.
    QUICK = "quick"
    #: Another client of the same Codex (another window on this session, Codex's TUI): no
    #: prompt here waits for it, yet it is the session's turn: it streams, a cancel here
    #: stops it, and prompts sent here queue behind it.
    FOREIGN = "foreign"
    #: A sub-agent's turn (Codex's ``turn/started`` on a child thread, or read from its turns).
    SUBAGENT = "subagent"


class TurnState(enum.Enum):
    """Where a thread's turn is (:mod:`bridge.engine.core.turns` has the table of moves). A
    record without a turn is ``IDLE``; a turn itself is never ``IDLE``: it ends by leaving
    the record."""

    IDLE = "idle"
    #: A root turn asked of Codex (turn/start, a command, its machine awaited), not named yet;
    #: or another client's turn whose id is not read yet.
    ASKED = "asked"
    #: A slash command answered without a Codex turn, not answered yet.
    ANSWERING = "answering"
    #: Codex named the turn (its id is known).
    RUNNING = "running"
    #: The user cancelled it (an ancestor's cancel, for a sub-agent): ``turn/interrupt`` goes
    #: once it is named; it ends when Codex says so.
    CANCELLING = "cancelling"


class Interrupt(enum.Enum):
    """Where a turn's ``turn/interrupt`` is."""

    NONE = "none"
    #: Another client's turn, unnamed: its id is being read before the interrupt can go.
    LOOKING_UP = "looking_up"
    SENT = "sent"
    #: Codex refused it (the turn had just ended, most often): no ``turn/completed`` is to be
    #: awaited on its account.
    REFUSED = "refused"


@dataclass(slots=True, eq=False)
class Turn:
    """The turn a thread runs now: a root's prompt, or a sub-agent's current turn.

    A root's turn exists from ``session/prompt`` (``request_id`` is the prompt
    to answer) until Codex says it ended; its ``id`` is known once Codex names
    it. A sub-agent's turn exists from ``turn/started`` to ``turn/completed``.
    Its state (kind, id, cancel, interrupt, failure) changes only in
    :mod:`bridge.engine.core.turns`, which also makes it; the features read it, and
    keep its counts (user messages, errors, retries).
    """

    id: str | None = None
    #: The ``session/prompt`` this turn answers (roots only).
    request_id: RequestId | None = None
    #: The root turn whose work a sub-agent's turn does (Codex's ``rootTurnId``).
    root_turn_id: str | None = None
    #: Where it is (see :class:`TurnState`); moved only by :mod:`bridge.engine.core.turns`.
    state: TurnState = TurnState.RUNNING
    #: Where its ``turn/interrupt`` is.
    interrupt: Interrupt = Interrupt.NONE
    #: Who it is for (see :class:`TurnKind`).
    kind: TurnKind = TurnKind.SUBAGENT
    #: A ``FOREIGN`` turn already running when the session opened here: the items it started
    #: since (the others began before, and stream nothing here: their text, partly
    #: streamed elsewhere, is shown whole when they complete).
    joined: set[str] | None = None
    #: User messages Codex reported in this turn (the prompt's, then steered input).
    user_messages: int = 0
    #: The last non-retried ``error`` notification: the reason a failed turn gives.
    error_message: str | None = None
    #: That notification's ``codexErrorInfo``.
    error_info: Any = None
    #: ``error`` notifications with ``willRetry`` (Codex cannot reach its model), and how
    #: many of them had no retry budget left ("waiting for network").
    retries: int = 0
    waits: int = 0
    #: Why the bridge stopped this turn itself (no sign-in, the model out of reach): the
    #: prompt's error once Codex reports the turn ended.
    failure: RpcError | None = None
    #: The thread's tokens before this turn's first model request (the first
    #: ``thread/tokenUsage/updated`` of the turn: its ``total`` less its ``last``), and
    #: its latest ``total``: the turn's own tokens are the difference (the prompt's answer).
    tokens_before: codex_types.TokenUsageBreakdown | None = None
    tokens_now: codex_types.TokenUsageBreakdown | None = None

    @property
    def cancelled(self) -> bool:
        """The user cancelled this work (its own cancel, or an ancestor's)."""
        return self.state is TurnState.CANCELLING


@dataclass(slots=True, eq=False)
class QueuedPrompt:
    """A ``session/prompt`` that arrived while a turn ran: it starts when the turn ends."""

    request_id: RequestId
    #: The prompt as Codex input (decoded and checked on arrival).
    inputs: list[Any]


@dataclass(slots=True, eq=False)
class Prompt:
    """A ``session/prompt`` of the client's, from arrival until it is answered."""

    request_id: RequestId
    #: The prompt as the client sent it (ACP v2 echoes it as the user message).
    content: list[Raw]
    #: The user message it became, once inserted (ACP v2 answers the prompt then).
    message_id: str | None = None


@dataclass(slots=True, eq=False)
class Question:
    """Codex asking the user (an approval, a question, an elicitation), from arrival until it
    settles: Codex answered, exactly once."""

    codex_id: RequestId
    method: str
    thread_id: str
    turn_id: str | None
    #: What Codex gets when the work is cancelled, and when an answer cannot be used.
    cancel: Any
    decline: Any
    #: Turns the client's result into Codex's answer (bad input → ``decline``, logged).
    read_answer: Callable[[Raw], Any] | None = None
    #: Run once the client's answer has been passed on to Codex.
    after_answer: Callable[[Any], None] | None = None
    client_id: RequestId | None = None
    client_answered: bool = False
    settled: bool = False
    #: (session, tool call id) of the tool call the permission request holds ``pending``:
    #: the asking thread's own, or one it introduced where it asks (see ``introduced``).
    tool_call: tuple[str, str] | None = None
    #: The request told the session of its tool call (no item of it was shown there).
    introduced: bool = False
    #: A Codex item of the same id reports what really happened (a command, a patch, an
    #: MCP call): it drives the tool call once the request settles. Else (a permissions
    #: request, an MCP approval whose item is unknown) the tool call stands for the
    #: question alone and ends when it settles.
    item_follows: bool = False


@dataclass(slots=True, eq=False)
class ToolCall:
    """A tool item the client has been told about and that has not finished."""

    item: items.ToolItem
    #: Shown as Zed's terminal (see :mod:`bridge.engine.features.tools.tools`).
    terminal: bool = False
    #: What a running command printed so far (``outputDelta``, stdin echoes).
    output: str = ""
    #: A changed file's text as the client read it, by the change's path.
    files: dict[str, str] = field(default_factory=dict)
    #: Paths asked of the client already (answered or not).
    asked: set[str] = field(default_factory=set)
    reads_pending: int = 0
    completed: bool = False
    #: The content last sent, encoded: a file read that changes nothing sends nothing.
    sent_content: bytes = b""


@dataclass(slots=True, eq=False)
class Settings:
    """A session's settings: what Codex reported, what the user picked, what was shown."""

    approval: Any
    sandbox: Any
    model: str
    effort: str | None
    #: The model Codex reported when the session opened (kept on offer).
    opened_model: str = ""
    #: The thread's first policies when they match no preset (the ``config`` mode).
    config_policy: tuple[Any, Any] | None = None
    #: Who Codex said answers the thread's approvals (``user``, ``auto_review``), and
    #: whether it said (a Codex without reviewers: no ``auto-review`` mode).
    reviewer: str = "user"
    reviewer_known: bool = False
    #: Codex's collaboration mode (``default``, ``plan``), as last reported, and the pick.
    collaboration: str = "default"
    picked_collaboration: str | None = None
    #: A collaboration mode was set for the thread (its settings carry a model and an
    #: effort, which come before the thread's own): a later model pick goes in it too.
    collaboration_set: bool = False
    picked_mode: str | None = None
    picked_model: str | None = None
    picked_effort: str | None = None
    #: The model provider Codex runs the thread on (``modelProvider`` of the open's answer).
    provider: str | None = None
    #: The machine the thread acts on, as Codex last reported it, and the user's pick
    #: (which goes with every turn: ``turn/start``'s environments stick in the thread).
    machine: str = "local"
    picked_machine: str | None = None
    #: What the client was last told, to send an update only when something changed.
    shown_mode: str = ""
    shown_options: bytes = b""
    #: The settings Codex will report (``thread/settings/updated``, which follows its answer)
    #: for each update of the bridge's it has answered, oldest first (approval, sandbox,
    #: model, effort): a report of one followed by another is stale.
    echoes: list[tuple[Any, Any, str, str | None]] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class HeldMessage:
    """One Codex message for a thread whose parentage is not known yet (decoded)."""

    method: str
    params: Any
    #: The request id, for a Codex request; ``None`` for a notification.
    request_id: RequestId | None = None


@dataclass(slots=True, eq=False)
class Unplaced:
    """A thread seen before anyone said whose it is: its traffic, and what is asked."""

    held: list[HeldMessage] = field(default_factory=list)
    reading: bool = False
    read_failed: bool = False
    #: The parent named by a spawn item, before the thread read came back.
    parent_hint: str | None = None
    root_turn_hint: str | None = None


@dataclass(slots=True, eq=False)
class Status:
    """Codex's status of the thread (``thread/status/changed``), as last reported."""

    type: str = ""
    flags: frozenset[str] = frozenset()

    @classmethod
    def of(cls, raw: object) -> Status | None:
        """Codex's status object (``{type, activeFlags?}``) as a ``Status``, if it is one."""
        kind = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(kind, str):
            return None
        flags = raw.get("activeFlags") if isinstance(raw, dict) else None
        return cls(kind, frozenset(f for f in flags or [] if isinstance(f, str)))


@dataclass(slots=True, eq=False)
class Steer:
    """One ``_session/steering`` request waiting its turn
    (:mod:`bridge.engine.features.prompts._steering`)."""

    request_id: RequestId
    inputs: list[Any]
    prompt_required: bool
    #: ``turn/steer`` is with Codex: its answer moves the session's steers on.
    sent: bool = False


#: An MCP server the client named that Codex cannot carry: its name, its transport.
LeftOut: TypeAlias = tuple[str, str]


class Stream(msgspec.Struct):
    """What a session's streamed answer has been so far (the streaming feature's part of
    the record: :mod:`bridge.engine.features.prompts.streaming` alone writes it)."""

    #: Items whose text arrived as deltas; their ``item/completed`` repeats it.
    streamed_items: set[str] = msgspec.field(default_factory=set)
    #: Answers Codex said at ``item/started`` not to show: their deltas are dropped.
    withheld_items: set[str] = msgspec.field(default_factory=set)
    #: AIR: the phase Codex gave an answer at ``item/started``, for its chunks: item id → phase.
    message_phases: dict[str, str] = msgspec.field(default_factory=dict)
    #: Codex's last token usage report (``/status`` shows the context use).
    usage: Any = None
    #: What Codex last estimated the thread cost, in millionths of a US dollar
    #: (``account/usage/read``); ``None``: not known (never shown as a zero).
    cost_usd_micros: int | None = None

    def turn_ended(self) -> None:
        """What the turn's items were is over with it."""
        self.streamed_items.clear()
        self.withheld_items.clear()
        self.message_phases.clear()


class Shown(msgspec.Struct):
    """What a v2 client is told of the session's own work (the v2 face's part of the
    record: :mod:`bridge.engine.faces.v2` alone writes it)."""

    #: Inserted prompts whose work has not ended.
    working: int = 0
    #: A turn Codex started with no prompt of this client's (a goal's, another client's);
    #: ``workstate.ANY_TURN`` for one already running when the session was resumed.
    turn_elsewhere: str | None = None
    #: Permission requests (client request ids) of this session the client holds.
    asking: set[RequestId] = msgspec.field(default_factory=set)
    #: The work state last sent on the session's own stream.
    state: str = "idle"
    #: Tool calls that advertise ``cancel`` now (running commands), and those the client
    #: cancelled (a failure of one then is ``cancelled``).
    cancellable: set[str] = msgspec.field(default_factory=set)
    cancelled_calls: set[str] = msgspec.field(default_factory=set)


class McpNotes(msgspec.Struct):
    """The session's MCP servers as the user hears of them (the MCP feature's part of the
    record: :mod:`bridge.engine.features.sessions.mcp_servers` alone writes it)."""

    #: The servers the client named that the bridge left out, told when the open is answered.
    left_out: tuple[LeftOut, ...] = ()
    #: Each server whose failure to start the user was told of, with Codex's reason: told
    #: once, again only after it was ready meanwhile.
    failed: dict[str, str] = msgspec.field(default_factory=dict)
    #: What the user hears of its MCP servers, kept until the open is answered (the client
    #: knows no session before); ``None``: told as it comes.
    untold: list[Callable[[], None]] | None = None


class ToolCalls(msgspec.Struct):
    """A thread's tool calls in flight (the tools feature's part of the record:
    :mod:`bridge.engine.features.tools.tools` writes it; the others tell it through the
    methods below)."""

    #: The calls in progress, by item id.
    calls: dict[str, ToolCall] = msgspec.field(default_factory=dict)
    #: Every tool call announced: a late ``item/completed`` updates it, never announces twice.
    announced: set[str] = msgspec.field(default_factory=set)
    #: A hidden sub-agent's tool calls that a permission request introduced on the session
    #: it asked on: item id → (that session, the agent's name that prefixes the title).
    #: The item's own notifications update the tool call there until it completes.
    shown_on: dict[str, tuple[str, str]] = msgspec.field(default_factory=dict)
    #: Tool calls the bridge ended when their turn ended unfinished (interrupted, failed):
    #: Codex's own ``item/completed`` for them comes later, after the prompt's answer, and
    #: is dropped. Replaced at each such turn end, so it never grows past one turn's calls.
    ended: set[str] = msgspec.field(default_factory=set)

    def announce(self, call_id: str) -> None:
        """Call ``call_id`` was announced (by a permission request, a replay, a task)."""
        self.announced.add(call_id)

    def show_on(self, call_id: str, session_id: str, agent: str) -> None:
        """A hidden sub-agent's call, introduced on session ``session_id``: followed there."""
        self.shown_on[call_id] = (session_id, agent)

    def unfollow(self, call_id: str) -> bool:
        """Stop following ``call_id`` elsewhere; whether it was followed."""
        return self.shown_on.pop(call_id, None) is not None

    def end_with_turn(self, call_ids: Iterable[str]) -> None:
        """These calls ended with their turn: Codex's late completions are dropped."""
        self.ended |= set(call_ids)


class SessionLife(msgspec.Struct):
    """A session's open, close and life across Codex's restarts (the session lifecycle's
    part of the record: :mod:`bridge.engine.features.sessions.lifecycle` writes it; the
    others tell it through the methods below)."""

    #: A session's other folders (ACP ``additionalDirectories``, absolute, normalised, in
    #: the client's order): Codex's ``runtimeWorkspaceRoots`` after ``cwd``, so writable
    #: under workspace-write as ``cwd`` is; the client names them again at each open.
    folders: tuple[str, ...] = ()
    #: Codex's thread has other folders than these (a load or resume that named none,
    #: of a thread stored with some): the next ``turn/start`` sends them.
    folders_unsent: bool = False
    #: A load, resume or fork of it is in flight.
    opening: bool = False
    #: ``session/close`` requests waiting for it to close.
    closing: list[RequestId] | None = None
    #: Codex came back without this session's thread (one never prompted is not stored,
    #: so it does not survive a restart of Codex): what its requests are answered.
    gone: str | None = None
    #: Codex has not written the thread (never prompted): after a reconnection its resume
    #: may take a second try, and prompts wait for it (see ``resuming``).
    unstored: bool = False
    #: Codex came back and such a session's ``thread/resume`` is under way: a turn started
    #: before this connection subscribes to the thread would stream nowhere.
    resuming: bool = False

    def started(self, folders: tuple[str, ...]) -> None:
        """``session/new`` opened it with ``folders``; Codex writes the thread at its
        first turn."""
        self.folders = folders
        self.unstored = True

    def stored(self) -> None:
        """Codex started a turn on the thread: it is written."""
        self.unstored = False

    def folders_sent(self) -> None:
        """A ``turn/start`` named the session's folders."""
        self.folders_unsent = False

    def resume_begun(self) -> None:
        """Codex came back: the session's resume is under way, if it has to wait for one."""
        self.resuming = self.unstored

    def resume_ended(self) -> None:
        """The resume is over (or Codex was lost again): prompts wait no more."""
        self.resuming = False

    def found(self, gone: str | None = None) -> None:
        """Codex came back with the thread (``gone`` ``None``), or without it: why."""
        self.gone = gone


class Placing(msgspec.Struct):
    """Where a thread stands in being placed under its parent and announced (the
    sub-agents' placement's part of the record:
    :mod:`bridge.engine.features.subagents._placement` writes it; the others tell it
    through the methods below)."""

    #: Another client's thread (another window's, Codex's TUI's): never shown here.
    other: bool = False
    #: Its traffic held until its parent is known (``None``: placed, or never held).
    unplaced: Unplaced | None = None
    #: A sub-agent placed from its live traffic that Codex has not yet shown at work
    #: (no ``active`` status, no turn): Codex's ``idle`` for it is a new thread about
    #: to start its first turn, not work that ended (see :func:`workstate.reportable`).
    unstarted: bool = False
    #: Children waiting for this thread to be placed before they can be announced.
    waiting_children: list[str] = msgspec.field(default_factory=list)
    #: What to send once this thread is announced (messages naming it).
    after_announce: list[Callable[[], None]] = msgspec.field(default_factory=list)

    def once_announced(self, send: Callable[[], None]) -> None:
        """Send ``send`` once the thread is announced (a message naming it)."""
        self.after_announce.append(send)

    def at_work(self) -> None:
        """Codex showed the thread at work: its ``idle`` is work that ended from now on."""
        self.unstarted = False

    def forget_held(self) -> None:
        """What was held for it, and the children waiting for it, are dropped."""
        self.unplaced = None
        self.waiting_children.clear()


class Work(msgspec.Struct):
    """A thread's work state: what Codex says of it, how its last turn ended, what the
    client was told (the sub-agents' work's part of the record:
    :mod:`bridge.engine.features.subagents._work` writes it; the others tell it through the
    methods below). The inputs of :func:`bridge.engine.core.workstate.snapshot`."""

    #: Codex's thread status and flags (``None``: not known).
    status: Status | None = None
    #: How its last turn ended (``idle`` + stop reason, or + error).
    outcome: Any = None
    #: Codex was lost while it worked: its state is unknown.
    lost: bool = False
    #: The last work state and cancel capability the client was told.
    reported: Any = None
    reported_cancel: bool = False
    #: Root turns of this (root) thread the client cancelled: sub-agent turns doing
    #: their work are stopped when they start.
    cancelled_turns: set[str] = msgspec.field(default_factory=set)

    def seen(self, status: Status | None) -> None:
        """Codex said the thread's status as it opened."""
        self.status = status

    def found(self, status: Status | None) -> None:
        """Codex, back, says the thread's status: what was lost is known again."""
        self.lost = False
        self.status = status

    def ended(self, outcome: Any) -> None:
        """A turn ended thus: the thread is idle."""
        self.outcome = outcome
        self.status = Status(type="idle")

    def last_ended(self, outcome: Any) -> None:
        """Its last stored turn ended thus (read again after Codex came back)."""
        self.outcome = outcome
