"""The thread-to-session identity map: one record per Codex thread, one registry.

A session id *is* the Codex thread id (a UUIDv7: unique, stable across
restarts of either program, so nothing has to be persisted to keep it
stable). Everything the bridge knows about one thread lives in its
:class:`ThreadRecord`: who it is (parent, depth, nickname, role), how the
client is shown it, its turn in flight, its work state, the Codex requests it
has pending, its tool calls in progress, its settings. :class:`Threads`
creates, finds and forgets records; forgetting a thread forgets its
descendants with it, in one call, and remembers their ids so that late
traffic for them is recognised as belonging to no session.

How a thread is shown (:attr:`ThreadRecord.view`):

========  =================================================================
``root``  a session the client opened (new, load, resume, fork)
``child`` a sub-agent announced to the client on its parent's stream
``hidden`` a sub-agent the client is not shown (it did not declare
          ``subagents``, or its parentage could not be read): its questions
          are asked on its root session
``held``  traffic arrived before its parentage is known: kept, in order,
          while the thread is read
``other`` no session here shows it (another client's thread): its traffic
          is left to that client
========  =================================================================

This module is data and queries only: it sends nothing. The features change
the records; ``docs/architecture.md`` lists which feature changes which field.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from msgspec import Raw

from ...codex import items
from ...codex import types as codex_types
from ...jsonrpc import RequestId, RpcError

#: How deep a chain of sub-agents the bridge follows before it stops looking up.
MAX_DEPTH = 1000


class View(enum.Enum):
    ROOT = "root"
    CHILD = "child"
    HIDDEN = "hidden"
    HELD = "held"
    OTHER = "other"


# -- the parts of a record --------------------------------------------------------------


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
    #: The user cancelled this work (its own cancel, or an ancestor's).
    cancel_requested: bool = False
    interrupt_sent: bool = False
    #: Codex refused the ``turn/interrupt`` (the turn had just ended, most often): no
    #: ``turn/completed`` of it is to be awaited.
    interrupt_refused: bool = False
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


# -- what a record asks Codex ----------------------------------------------------------------
#
# A Codex request whose answer changes a record is an entry on that record
# (``ThreadRecord.codex_asks``) from the moment it is sent until Codex answers it
# (:meth:`bridge.engine.core.hub.Hub.ask`). The answer goes to the feature with the entry,
# and only while the record still holds it: an entry is withdrawn by what ends what it
# is about, and its answer is then stale (dropped). A ``StartTurn`` or a ``FindTurn`` is
# withdrawn when its turn leaves the record (:mod:`bridge.engine.core.turns`); a read of
# what the record shows (``ReadSubagent``, ``ReadParentage``, ``ListSkills``,
# ``ListTerminals``) when the record is forgotten or dropped (:class:`Threads`). The
# others are answered whatever became of their record: the answer is owed to someone
# else (a client's steer, load or pick, prompts waiting on a resume), or is news of a
# turn that has ended (a refused interrupt).


@dataclass(slots=True, eq=False)
class StartTurn:
    """``turn/start`` (or a slash command's request, ``command``) for ``turn``: a prompt's
    (``turn.request_id``), or a steer's on an idle session."""

    turn: Turn
    #: A slash command's request (``thread/compact/start``...): no user message item will
    #: name its prompt.
    command: bool = False


@dataclass(slots=True, eq=False)
class InterruptTurn:
    """``turn/interrupt`` of ``turn`` (named): a refusal is news even once it has ended."""

    turn: Turn


@dataclass(slots=True, eq=False)
class FindTurn:
    """``thread/read`` (with turns) naming ``turn``, another client's turn already running
    when the session opened, so that it can be interrupted."""

    turn: Turn


@dataclass(slots=True, eq=False)
class SteerTurn:
    """``turn/steer`` of ``steer``'s input into turn ``expected_turn_id``: the steer's
    client request is answered whatever became of the session."""

    steer: Steer
    expected_turn_id: str


@dataclass(slots=True, eq=False)
class ResumeThread:
    """``thread/resume`` of a session after Codex came back; ``written``: its turns were
    read already, to have Codex write a thread it never stored (tried once)."""

    written: bool = False


@dataclass(slots=True, eq=False)
class WriteThread:
    """``thread/read`` (with turns) of a session Codex holds and never wrote, after Codex
    came back: reading it writes it; its resume is tried again, whatever the answer."""


@dataclass(slots=True, eq=False)
class ReadSubagent:
    """``thread/read`` (with turns) of a sub-agent after Codex came back: its status and
    its last turn. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ListSkills:
    """``skills/list`` for a session's folder: its skills become its commands (offered as
    to an AIR client, ``air``). Nothing to do once it is forgotten."""

    air: bool


@dataclass(slots=True, eq=False)
class ListTerminals:
    """``thread/backgroundTerminals/list`` of a session opened again: the commands its
    thread still runs become tasks. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ReadCost:
    """``account/usage/read`` of a session's thread at a turn's end: what Codex estimates
    it cost so far goes on its usage. Nothing to do once it is forgotten."""


@dataclass(slots=True, eq=False)
class ReadParentage:
    """``thread/read`` of a thread no session shows yet, to learn its parent and place it
    (``unplaced``: what it holds meanwhile). Nothing to place once its record is dropped."""

    unplaced: Unplaced


#: An MCP server the client named that Codex cannot carry: its name, its transport.
LeftOut: TypeAlias = tuple[str, str]


@dataclass(slots=True, eq=False)
class OpenStored:
    """A load or resume of a stored session (``method``, client request ``rid``), one
    request after the other on the record being opened: ``thread/read`` (``stored``, once
    answered), ``thread/resume`` (``written``: again, once its turns were read to have Codex
    write a thread it never stored), ``config/read`` for a thread never stored. The client
    waits on it: never withdrawn (a cancel of the client's marks it ``cancelled``)."""

    rid: RequestId
    method: str
    cwd: str
    #: ``config`` for the resume: the bridge's overrides and the client's MCP servers.
    config: dict[str, Any]
    #: The session's other folders, as the client named them for this open (checked).
    folders: tuple[str, ...]
    #: The history (and its sub-agents') goes out before the answer (a load).
    replay: bool
    #: The MCP servers the client named that are left out (told once the session opens).
    left_out: tuple[LeftOut, ...] = ()
    stored: codex_types.Thread | None = None
    written: bool = False
    #: The client cancelled it (``$/cancel_request``, answered -32800): Codex's answer to
    #: what was asked already ends it, and nothing more is asked.
    cancelled: bool = False


@dataclass(slots=True, eq=False)
class StorePick:
    """``thread/settings/update`` storing the user's pick (``change``) in the thread:
    once Codex has it, ``settings`` say so and client request ``rid`` is answered, as
    ``session/set_mode`` (``mode``) or as a config option's set. The client waits on it:
    never withdrawn."""

    rid: RequestId
    settings: Settings
    #: Codex's ``ThreadSettingsUpdateParams``.
    change: Any
    mode: bool


#: What a record may be asking Codex (a closed union: :meth:`bridge.engine.core.hub.Hub.ask`).
CodexAsk: TypeAlias = (
    StartTurn
    | InterruptTurn
    | FindTurn
    | SteerTurn
    | ResumeThread
    | WriteThread
    | ReadSubagent
    | ReadParentage
    | OpenStored
    | StorePick
    | ListSkills
    | ListTerminals
    | ReadCost
)


def withdraw(record: ThreadRecord, entry: CodexAsk) -> bool:
    """Take ``entry`` off ``record``: ``False`` when it held it no longer."""
    asks = record.codex_asks
    for i, held in enumerate(asks):
        if held is entry:
            del asks[i]
            return True
    return False


def withdraw_turn(record: ThreadRecord, turn: Turn) -> None:
    """``turn`` left ``record``: what was asked for it alone is stale."""
    if record.codex_asks:
        record.codex_asks = [
            a for a in record.codex_asks if not (isinstance(a, _WITH_TURN) and a.turn is turn)
        ]


def withdraw_record(record: ThreadRecord) -> None:
    """``record`` is forgotten or dropped: its reads are stale."""
    if record.codex_asks:
        record.codex_asks = [a for a in record.codex_asks if not isinstance(a, _WITH_RECORD)]


#: What a turn's end makes stale, and a record's (see above).
_WITH_TURN = (StartTurn, FindTurn)
_WITH_RECORD = (ReadSubagent, ReadParentage, ListSkills, ListTerminals)


# -- the record -------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ThreadRecord:
    """Everything the bridge knows about one Codex thread."""

    id: str
    # -- identity
    parent_id: str | None = None
    depth: int = 0
    nickname: str | None = None
    role: str | None = None
    cwd: str = ""
    #: A session's other folders (ACP ``additionalDirectories``, absolute, normalised, in
    #: the client's order): Codex's ``runtimeWorkspaceRoots`` after ``cwd``, so writable
    #: under workspace-write as ``cwd`` is; the client names them again at each open.
    folders: tuple[str, ...] = ()
    #: Codex's thread has other folders than these (a load or resume that named none,
    #: of a thread stored with some): the next ``turn/start`` sends them.
    folders_unsent: bool = False
    # -- how it is shown (see View)
    session: bool = False
    visible: bool = False
    other: bool = False
    unplaced: Unplaced | None = None
    #: A load, resume or fork of it is in flight.
    opening: bool = False
    #: ``session/close`` requests waiting for it to close.
    closing: list[RequestId] | None = None
    # -- work
    turn: Turn | None = None
    #: Prompts waiting for the turn to end, in arrival order (roots only).
    queued: list[QueuedPrompt] = field(default_factory=list)
    #: ``_session/steering`` requests, handled one at a time in arrival order.
    steers: list[Steer] = field(default_factory=list)
    status: Status | None = None
    #: How its last turn ended (``idle`` + stop reason, or + error).
    outcome: Any = None
    #: Codex was lost while it worked: its state is unknown.
    lost: bool = False
    #: Codex came back without this session's thread (one never prompted is not stored,
    #: so it does not survive a restart of Codex): what its requests are answered.
    gone: str | None = None
    #: Codex has not written the thread (never prompted): after a reconnection its resume
    #: may take a second try, and prompts wait for it (see ``resuming``).
    unstored: bool = False
    #: Codex came back and such a session's ``thread/resume`` is under way: a turn started
    #: before this connection subscribes to the thread would stream nowhere.
    resuming: bool = False
    #: A sub-agent placed from its live traffic that Codex has not yet shown at work
    #: (no ``active`` status, no turn): Codex's ``idle`` for it is a new thread about
    #: to start its first turn, not work that ended (see :func:`workstate.reportable`).
    unstarted: bool = False
    #: The last work state and cancel capability the client was told.
    reported: Any = None
    reported_cancel: bool = False
    #: Root turns of this (root) thread the client cancelled: sub-agent turns doing
    #: their work are stopped when they start.
    cancelled_turns: set[str] = field(default_factory=set)
    #: Root turns of this (root) thread this connection started (its prompts'): once the
    #: session is closed, a sub-agent working for one is stopped; one working for another
    #: client's turn is left to that client.
    own_turns: set[str] = field(default_factory=set)
    #: The machine each turn this connection started acted on (Codex's stored turns do not
    #: say): a rewind leaves the files of a turn that worked elsewhere alone.
    turn_machines: dict[str, str] = field(default_factory=dict)
    # -- what it has in flight
    #: Codex requests whose answer changes this record, unanswered (see ``CodexAsk``).
    codex_asks: list[CodexAsk] = field(default_factory=list)
    questions: dict[RequestId, Question] = field(default_factory=dict)
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    #: Every tool call announced: a late ``item/completed`` updates it, never announces twice.
    announced_tools: set[str] = field(default_factory=set)
    #: The commands Codex still ran when a load read the history
    #: (``thread/backgroundTerminals/list``'s entries), kept for the one reader after the
    #: load's answer (async tasks): Codex is asked once, not twice. ``None``: not read.
    running_at_load: list[Any] | None = None
    #: A hidden sub-agent's tool calls that a permission request introduced on the session
    #: it asked on: item id → (that session, the agent's name that prefixes the title).
    #: The item's own notifications update the tool call there until it completes.
    shown_on: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Collab tool calls (``wait``, ``close_agent`` ...) shown and not completed yet.
    open_collab: dict[str, Any] = field(default_factory=dict)
    #: Tool calls the bridge ended when their turn ended unfinished (interrupted, failed):
    #: Codex's own ``item/completed`` for them comes later, after the prompt's answer, and
    #: is dropped. Replaced at each such turn end, so it never grows past one turn's calls.
    ended_tools: set[str] = field(default_factory=set)
    #: File-change and MCP items started, kept raw until they complete (an approval names them).
    started_items: dict[str, Raw] = field(default_factory=dict)
    #: Items whose text arrived as deltas; their ``item/completed`` repeats it.
    streamed_items: set[str] = field(default_factory=set)
    #: Answers Codex said at ``item/started`` not to show: their deltas are dropped.
    withheld_items: set[str] = field(default_factory=set)
    #: AIR: the phase Codex gave an answer at ``item/started``, for its chunks: item id → phase.
    message_phases: dict[str, str] = field(default_factory=dict)
    settings: Settings | None = None
    #: The enabled skills Codex has for the session's folder, offered as commands: name → path.
    skills: dict[str, str] = field(default_factory=dict)
    #: Codex's last token usage report (``/status`` shows the context use).
    usage: Any = None
    #: What Codex last estimated the thread cost, in millionths of a US dollar
    #: (``account/usage/read``); ``None``: not known (never shown as a zero).
    cost_usd_micros: int | None = None
    # -- sub-agents
    #: Children waiting for this thread to be placed before they can be announced.
    waiting_children: list[str] = field(default_factory=list)
    #: What to send once this thread is announced (messages naming it).
    after_announce: list[Callable[[], None]] = field(default_factory=list)
    #: Children whose history a load replayed (their current state follows the response).
    replayed: list[ThreadRecord] = field(default_factory=list)
    # -- the session's prompts (the prompts feature's)
    #: Prompts received and not answered yet.
    prompts: dict[RequestId, Prompt] = field(default_factory=dict)
    #: The prompt whose ``turn/start`` went to Codex, until it is inserted (Codex's user
    #: message item for it gives its message an id).
    awaiting_message: RequestId | None = None
    # -- what the client is told of the session's own work (ACP v2 says it; see faces/v2.py)
    #: Inserted prompts whose work has not ended.
    working: int = 0
    #: A turn Codex started with no prompt of this client's (a goal's, another client's);
    #: ``workstate.ANY_TURN`` for one already running when the session was resumed.
    turn_elsewhere: str | None = None
    #: Permission requests (client request ids) of this session the client holds.
    asking: set[RequestId] = field(default_factory=set)
    #: The work state last sent on the session's own stream.
    shown_state: str = "idle"
    #: Tool calls that advertise ``cancel`` now (running commands), and those the client
    #: cancelled (a failure of one then is ``cancelled``).
    cancellable: set[str] = field(default_factory=set)
    cancelled_calls: set[str] = field(default_factory=set)
    # -- its MCP servers, as the user hears of them (the MCP feature's)
    #: The servers the client named that the bridge left out, told when the open is answered.
    mcp_left_out: tuple[LeftOut, ...] = ()
    #: Each server whose failure to start the user was told of, with Codex's reason: told
    #: once, again only after it was ready meanwhile.
    mcp_failed: dict[str, str] = field(default_factory=dict)
    #: What the user hears of its MCP servers, kept until the open is answered (the client
    #: knows no session before); ``None``: told as it comes.
    mcp_untold: list[Callable[[], None]] | None = None

    @property
    def view(self) -> View:
        if self.session:
            if self.parent_id is None:
                return View.ROOT
            return View.CHILD if self.visible else View.HIDDEN
        return View.OTHER if self.other else View.HELD

    @property
    def is_child(self) -> bool:
        return self.session and self.parent_id is not None


#: How many forgotten threads (and their turns) are remembered, the newest.
MAX_FORGOTTEN = 10_000


class Threads:
    """Every thread the bridge knows, by id; see the module docstring."""

    def __init__(self) -> None:
        self._records: dict[str, ThreadRecord] = {}
        #: Ids of the sessions the client is shown, and of every session (shown or
        #: hidden) whose Codex traffic is handled as it comes (not held: see
        #: :meth:`hold_traffic`): indexes of the records, kept here, read on the hot path
        #: (every streamed delta asks). Read-only outside this class.
        self.shown_ids: set[str] = set()
        self.session_ids: set[str] = set()
        #: Threads forgotten (closed, or under a closed one): their late traffic is no
        #: one's. The value says whether it was a sub-agent (its later work is stopped).
        self._forgotten: dict[str, bool] = {}
        #: The own turns (``ThreadRecord.own_turns``) of the sessions forgotten (a dict for
        #: its order: the oldest go first past :data:`MAX_FORGOTTEN`).
        self.forgotten_turns: dict[str, None] = {}
        #: Prompts inserted under a message id of this bridge's, numbered
        #: (:func:`bridge.engine.core.turns.insert`).
        self.prompt_ids = 0

    def census(self) -> dict[str, int]:
        """How much is held (a long life's measure: ``bench/soak.py``)."""
        views: dict[str, int] = {}
        for record in self._records.values():
            key = f"records.{record.view.value}"
            views[key] = views.get(key, 0) + 1
        return {
            "records": len(self._records),
            **views,
            "sessions": len(self.session_ids),
            "forgotten": len(self._forgotten),
            "forgottenTurns": len(self.forgotten_turns),
            "codexAsks": sum(len(record.codex_asks) for record in self._records.values()),
        }

    # -- finding ------------------------------------------------------------------------

    def get(self, thread_id: str) -> ThreadRecord | None:
        return self._records.get(thread_id)

    def record(self, thread_id: str) -> ThreadRecord:
        """The record of ``thread_id``, created (shown as nothing yet) when there is none."""
        record = self._records.get(thread_id)
        if record is None:
            record = self._records[thread_id] = ThreadRecord(thread_id)
        return record

    def is_session(self, thread_id: str) -> bool:
        return thread_id in self.session_ids

    def hold_traffic(self, record: ThreadRecord) -> None:
        """Codex's traffic for a session waits, as a thread no session shows has its held
        (the sub-agent gate keeps it), until :meth:`release_traffic`: a load replaying its
        history in pages, after the resume subscribed it, shows what Codex says now only
        after the history, as a load that read it whole before the resume does."""
        self.session_ids.discard(record.id)

    def release_traffic(self, record: ThreadRecord) -> None:
        if record.session:
            self.session_ids.add(record.id)

    def is_shown(self, thread_id: str) -> bool:
        """Whether the client is shown this session (its updates are sent)."""
        return thread_id in self.shown_ids

    def session(self, thread_id: str) -> ThreadRecord | None:
        """The session ``thread_id`` is (root or sub-agent, shown or hidden), if it is one."""
        record = self._records.get(thread_id)
        return record if record is not None and record.session else None

    def require(self, session_id: str) -> ThreadRecord:
        """The session with this id, or a not-found error for the client."""
        record = self.session(session_id)
        if record is None:
            raise RpcError.not_found(f"Session not found: {session_id}", {"sessionId": session_id})
        return record

    def sessions(self) -> Iterator[ThreadRecord]:
        return (r for r in list(self._records.values()) if r.session)

    def children(self) -> Iterator[ThreadRecord]:
        return (r for r in list(self._records.values()) if r.is_child)

    def __iter__(self) -> Iterator[ThreadRecord]:
        return iter(list(self._records.values()))

    def __contains__(self, thread_id: object) -> bool:
        return isinstance(thread_id, str) and self.session(thread_id) is not None

    def take_prompt(self, request_id: RequestId) -> tuple[ThreadRecord, Prompt] | None:
        """The session holding prompt ``request_id``, and the prompt, no longer held (for
        an answer that did not come from the prompts feature: a defect's, most often)."""
        for record in self.sessions():
            prompt = record.prompts.pop(request_id, None)
            if prompt is not None:
                if record.awaiting_message == request_id:
                    record.awaiting_message = None  # answered before Codex named it
                return record, prompt
        return None

    def forgotten(self, thread_id: str) -> bool:
        return thread_id in self._forgotten

    def forgotten_subagent(self, thread_id: str) -> bool:
        """A sub-agent of a session that closed: any work it starts is no one's."""
        return self._forgotten.get(thread_id, False)

    # -- showing ------------------------------------------------------------------------

    def open_root(self, thread_id: str, cwd: str) -> ThreadRecord:
        """A session the client opened."""
        record = self.record(thread_id)
        self._forgotten.pop(thread_id, None)
        record.session, record.visible, record.cwd = True, True, cwd
        record.parent_id, record.depth = None, 0
        self._index(record)
        return record

    def add_child(
        self,
        thread_id: str,
        parent: ThreadRecord,
        *,
        nickname: str | None,
        role: str | None,
        cwd: str,
        visible: bool,
    ) -> ThreadRecord:
        """A sub-agent of ``parent``, shown (announced) or hidden."""
        record = self.record(thread_id)
        record.session, record.visible = True, visible
        record.parent_id, record.depth = parent.id, parent.depth + 1
        record.nickname, record.role = nickname, role
        record.cwd = cwd or parent.cwd
        self._index(record)
        return record

    def _index(self, record: ThreadRecord) -> None:
        self.session_ids.add(record.id)
        if record.visible:
            self.shown_ids.add(record.id)
        else:
            self.shown_ids.discard(record.id)

    # -- the tree -----------------------------------------------------------------------

    def parent(self, record: ThreadRecord) -> ThreadRecord | None:
        return self.session(record.parent_id) if record.parent_id is not None else None

    def descendants(self, thread_id: str) -> list[ThreadRecord]:
        """The sub-agents under ``thread_id``, children before grandchildren."""
        found: list[ThreadRecord] = []
        frontier = [thread_id]
        while frontier:
            parent = frontier.pop()
            for child in self.children():
                if child.parent_id == parent:
                    found.append(child)
                    frontier.append(child.id)
        return found

    def ancestors(self, record: ThreadRecord) -> Iterator[ThreadRecord]:
        """``record``'s parent, grandparent, ... up to its root session."""
        current = self.parent(record)
        for _ in range(MAX_DEPTH):
            if current is None:
                return
            yield current
            current = self.parent(current)

    def ask_target(self, thread_id: str) -> tuple[str, str | None]:
        """Where to ask a question of ``thread_id``: its own session, or (hidden child)
        the nearest shown ancestor, with the agent's name to say who asks."""
        record = self.session(thread_id)
        if record is None or record.view is not View.HIDDEN:
            return thread_id, None
        label = record.nickname or "a sub-agent"
        target = record
        for target in self.ancestors(record):
            if target.view is not View.HIDDEN:
                break
        return target.id, label

    def in_cancelled_work(self, record: ThreadRecord) -> bool:
        """Whether ``record``'s current (sub-agent) turn does work that was cancelled: its
        own, its root turn's, or that of an ancestor's running turn that spawned or
        messaged it. (A question; ``Terminals.work_cancelled`` is the event.)"""
        turn = record.turn
        if turn is None:
            return False
        if turn.cancel_requested:
            return True
        root = record
        for ancestor in self.ancestors(record):
            root = ancestor
            if ancestor.is_child and ancestor.turn is not None and ancestor.turn.cancel_requested:
                return True
        if turn.root_turn_id is None:
            return False
        if turn.root_turn_id in root.cancelled_turns:
            return True
        # The root's prompt was cancelled before Codex named its turn.
        prompt = root.turn
        return (
            prompt is not None
            and prompt.cancel_requested
            and root.parent_id is None
            and prompt.id == turn.root_turn_id
        )

    # -- forgetting ---------------------------------------------------------------------

    def drop(self, thread_id: str) -> ThreadRecord | None:
        """Drop the record of a thread no session here shows (another client's, or one
        held while it is read), once Codex forgot the thread: unlike :meth:`forget`, its id
        is not remembered (it was never a session here: what comes of it later is read
        afresh). A session's record is never dropped; ``None`` then."""
        record = self._records.get(thread_id)
        if record is None or record.session:
            return None
        del self._records[thread_id]
        withdraw_record(record)
        return record

    def forget(self, thread_id: str, *, subagent: bool = False) -> list[ThreadRecord]:
        """Forget ``thread_id`` and every sub-agent under it; return their records (the
        thread first) so that the caller answers whatever they held. Their ids are
        remembered: traffic that still arrives for them belongs to no session.
        ``subagent``: the thread is a sub-agent even if no record says so yet."""
        gone = [r for r in [self._records.get(thread_id)] if r is not None]
        gone += self.descendants(thread_id)
        for record in gone:
            self.forgotten_turns.update(dict.fromkeys(record.own_turns))
            self._records.pop(record.id, None)
            withdraw_record(record)
            self.session_ids.discard(record.id)
            self.shown_ids.discard(record.id)
            # A sub-agent whose parent no record names yet (still held), or once forgotten
            # as one (a failed reopen makes a record again, knowing no parent), is one.
            self._forgotten[record.id] = (
                record.parent_id is not None
                or (subagent and record.id == thread_id)
                or self._forgotten.get(record.id, False)
            )
        self._forgotten.setdefault(thread_id, subagent)
        # A daemon's editor may live for weeks: what it forgot is kept for late traffic
        # (seconds), not for ever.
        for kept in (self._forgotten, self.forgotten_turns):
            while len(kept) > MAX_FORGOTTEN:
                del kept[next(iter(kept))]
        return gone
