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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from msgspec import Raw

from ...jsonrpc import RequestId, RpcError
from .codex_asks import (
    CodexAsk,
    FindTurn,
    ListSkills,
    ListTerminals,
    ReadParentage,
    ReadSubagent,
    StartTurn,
)
from .record_parts import (
    McpNotes,
    Placing,
    Prompt,
    Question,
    QueuedPrompt,
    SessionLife,
    Settings,
    Shown,
    Steer,
    Stream,
    ToolCalls,
    Turn,
    Work,
)

#: How deep a chain of sub-agents the bridge follows before it stops looking up.
MAX_DEPTH = 1000


class View(enum.Enum):
    ROOT = "root"
    CHILD = "child"
    HIDDEN = "hidden"
    HELD = "held"
    OTHER = "other"


# -- a record's asks withdrawn ----------------------------------------------------------


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


#: What a turn's end makes stale, and a record's (:mod:`bridge.engine.core.codex_asks`).
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
    # -- how it is shown (see View)
    session: bool = False
    visible: bool = False
    #: Where a sub-agent thread stands in being placed and announced (placement's).
    placing: Placing = field(default_factory=Placing)
    # -- work
    turn: Turn | None = None
    #: Prompts waiting for the turn to end, in arrival order (roots only).
    queued: list[QueuedPrompt] = field(default_factory=list)
    #: ``_session/steering`` requests, handled one at a time in arrival order.
    steers: list[Steer] = field(default_factory=list)
    #: Its work state: Codex's status, how its last turn ended, what the client was told
    #: (the sub-agents' work's).
    work: Work = field(default_factory=Work)
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
    #: The commands Codex still ran when a load read the history
    #: (``thread/backgroundTerminals/list``'s entries), kept for the one reader after the
    #: load's answer (async tasks): Codex is asked once, not twice. ``None``: not read.
    running_at_load: list[Any] | None = None
    #: Collab tool calls (``wait``, ``close_agent`` ...) shown and not completed yet.
    open_collab: dict[str, Any] = field(default_factory=dict)
    #: File-change and MCP items started, kept raw until they complete (an approval names them).
    started_items: dict[str, Raw] = field(default_factory=dict)
    settings: Settings | None = None
    #: The enabled skills Codex has for the session's folder, offered as commands: name → path.
    skills: dict[str, str] = field(default_factory=dict)
    # -- sub-agents
    #: Children whose history a load replayed (their current state follows the response).
    replayed: list[ThreadRecord] = field(default_factory=list)
    # -- the session's prompts (the prompts feature's)
    #: Prompts received and not answered yet.
    prompts: dict[RequestId, Prompt] = field(default_factory=dict)
    #: The prompt whose ``turn/start`` went to Codex, until it is inserted (Codex's user
    #: message item for it gives its message an id).
    awaiting_message: RequestId | None = None
    # -- the parts other features write, each its own
    #: Its open, close and life across Codex's restarts (the session lifecycle's).
    life: SessionLife = field(default_factory=SessionLife)
    #: Its tool calls in flight (the tools feature's).
    tools: ToolCalls = field(default_factory=ToolCalls)
    #: What the session's streamed answer has been so far (the streaming feature's).
    stream: Stream = field(default_factory=Stream)
    #: What a v2 client is told of the session's own work (the v2 face's).
    shown: Shown = field(default_factory=Shown)
    #: Its MCP servers, as the user hears of them (the MCP feature's).
    mcp: McpNotes = field(default_factory=McpNotes)

    @property
    def view(self) -> View:
        if self.session:
            if self.parent_id is None:
                return View.ROOT
            return View.CHILD if self.visible else View.HIDDEN
        return View.OTHER if self.placing.other else View.HELD

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

    def is_held(self, record: ThreadRecord) -> bool:
        """Whether the session's traffic waits (:meth:`hold_traffic`)."""
        return record.session and record.id not in self.session_ids

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
        if turn.cancelled:
            return True
        root = record
        for ancestor in self.ancestors(record):
            root = ancestor
            if ancestor.is_child and ancestor.turn is not None and ancestor.turn.cancelled:
                return True
        if turn.root_turn_id is None:
            return False
        if turn.root_turn_id in root.work.cancelled_turns:
            return True
        # The root's prompt was cancelled before Codex named its turn.
        prompt = root.turn
        return (
            prompt is not None
            and prompt.cancelled
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
