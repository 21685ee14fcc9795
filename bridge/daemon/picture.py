"""The daemon's live picture of every thread of its Codex (pure: events in, a snapshot out).

Fed what the daemon's observer connection learns (``thread/list``, ``thread/read``,
``thread/started``, ``thread/status/changed``, ``thread/name/updated``, Codex lost),
it keeps one line per thread: its parent, title, cwd, age, and its work state
(``running`` / ``requires_action`` / ``idle`` / ``unknown``), computed by the
same function the bridge uses for sub-agents (:func:`bridge.engine.core.workstate.snapshot`).
``codex-acp-bridge status`` shows it.

A daemon lives for weeks and its Codex runs thread after thread: the picture holds at most
``limit`` threads (:data:`MAX_THREADS`, what a daemon started now reads of Codex's store),
forgetting those at rest that changed least recently, each with the threads under it; and
it forgets a thread Codex deleted or archived. What it forgot is told to the page's board
(:attr:`Picture.forgotten`), which keeps a row and a transcript tail per thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgspec

from ..codex.types import Thread
from ..engine.core import workstate
from ..engine.core.record_parts import Status
from ..engine.core.threads import ThreadRecord

#: Threads kept: as many as the watcher reads of Codex's store when it connects (20 pages
#: of 100). ``$CODEX_ACP_BRIDGE_DAEMON_THREADS`` sets another number.
MAX_THREADS = 2_000
ENV_MAX_THREADS = "CODEX_ACP_BRIDGE_DAEMON_THREADS"
#: States a thread may be forgotten in: nothing runs, nothing waits on a person.
_AT_REST = ("idle", "notLoaded", "systemError")

#: Active flags, as what the thread waits on.
WAITS_ON = {"waitingOnApproval": "approval", "waitingOnUserInput": "input"}


class ThreadLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One thread in ``status --json``."""

    threadId: str
    parentThreadId: str | None = None
    state: str
    waitingOn: list[str] = msgspec.field(default_factory=list)
    error: str | None = None
    title: str = ""
    cwd: str = ""
    #: Its other folders (a session's ``additionalDirectories``), known while Codex holds
    #: the thread: Codex reports a thread's roots for a loaded thread only.
    folders: list[str] = msgspec.field(default_factory=list)
    nickname: str | None = None
    model: str | None = None
    createdAt: int | None = None
    updatedAt: int | None = None
    #: The machine it works on (a daemon with machines); a sub-agent works on its root's.
    machine: str | None = None


class Picture:
    """Every thread the daemon's Codex knows, with its current state."""

    def __init__(
        self,
        machine_of: Callable[[str], str | None] | None = None,
        limit: int | None = None,
    ) -> None:
        """``machine_of``: the machine a thread was put on (the bridge's store), ``None``
        for this machine; without it, no thread says a machine. ``limit``: how many threads
        it keeps (default :data:`MAX_THREADS`, or ``$CODEX_ACP_BRIDGE_DAEMON_THREADS``)."""
        self._machine_of = machine_of
        self.limit = limit if limit is not None else _limit_from_environment()
        self._threads: dict[str, tuple[ThreadLine, ThreadRecord]] = {}
        #: Ephemeral threads: Codex's own helpers (the TUI titles a thread in one), not the
        #: user's; known, so their status changes do not send the watcher to read them.
        #: The newest ``limit`` of them, oldest first.
        self._ephemeral: dict[str, None] = {}
        #: Threads forgotten since the board last asked (:meth:`take_forgotten`).
        self._forgotten: list[str] = []
        self.codex_lost = False

    def __len__(self) -> int:
        return len(self._threads)

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._threads or thread_id in self._ephemeral

    def seen(self, stored: Thread) -> None:
        """A thread as ``thread/list``, ``thread/read`` or ``thread/started`` describe it."""
        if stored.ephemeral:
            self._ephemeral[stored.id] = None
            while len(self._ephemeral) > self.limit:
                del self._ephemeral[next(iter(self._ephemeral))]
            return
        known = self._threads.get(stored.id)
        line, record = known or (ThreadLine(threadId=stored.id, state=""), ThreadRecord(stored.id))
        line.parentThreadId = stored.parentThreadId
        line.title = " ".join((stored.name or stored.preview or "").split())
        line.cwd = stored.cwd
        roots = _roots(stored)
        if roots is not None:  # a stored thread Codex has not loaded says none
            line.folders = [root for root in roots if root != stored.cwd]
        line.nickname = stored.agentNickname
        line.model = stored.model or line.model
        line.updatedAt = stored.updatedAt
        # A known thread's status comes from thread/status/changed, newer than any read.
        if isinstance(stored.status, dict) and (known is None or record.work.status is None):
            record.work.status = _status(stored.status)
        self._threads[stored.id] = (line, record)
        if known is None and len(self._threads) > self.limit:
            self._forget_oldest()

    def gone(self, thread_id: str) -> None:
        """Codex deleted or archived the thread: it is forgotten, with the threads under it."""
        if thread_id in self._threads:
            self._forget([thread_id])
        self._ephemeral.pop(thread_id, None)

    def take_forgotten(self) -> list[str]:
        """The threads forgotten since the last call (the board drops their rows)."""
        forgotten, self._forgotten = self._forgotten, []
        return forgotten

    def _forget_oldest(self) -> None:
        """Down to ``limit``: the trees at rest that changed least recently go first."""
        children: dict[str, list[str]] = {}
        for line, _record in self._threads.values():
            if line.parentThreadId is not None and line.parentThreadId in self._threads:
                children.setdefault(line.parentThreadId, []).append(line.threadId)
        trees: list[tuple[int, list[str]]] = []
        for thread_id, (line, _record) in self._threads.items():
            if line.parentThreadId is not None and line.parentThreadId in self._threads:
                continue  # goes with its root
            tree = _tree(thread_id, children)
            if all(self._at_rest(member) for member in tree):
                newest = max(self._threads[m][0].updatedAt or 0 for m in tree)
                trees.append((newest, tree))
        trees.sort(key=lambda found: found[0])
        excess = len(self._threads) - self.limit
        for _newest, tree in trees:
            if excess <= 0:
                break
            self._forget(tree)
            excess -= len(tree)

    def _at_rest(self, thread_id: str) -> bool:
        status = self._threads[thread_id][1].work.status
        return status is None or status.type in _AT_REST

    def _forget(self, thread_ids: list[str]) -> None:
        children: dict[str, list[str]] = {}
        for line, _record in self._threads.values():
            if line.parentThreadId is not None:
                children.setdefault(line.parentThreadId, []).append(line.threadId)
        for thread_id in thread_ids:
            for member in _tree(thread_id, children):
                if self._threads.pop(member, None) is not None:
                    self._forgotten.append(member)

    def status(self, thread_id: str, status: dict[str, Any]) -> bool:
        """``thread/status/changed``; ``False`` when the thread is not known yet."""
        found = self._threads.get(thread_id)
        if found is None:
            return thread_id in self._ephemeral
        found[1].work.status = _status(status)
        return True

    def untitled(self, thread_id: str) -> bool:
        """Known, but with no title yet (a new thread: its first message names it)."""
        found = self._threads.get(thread_id)
        return found is not None and not found[0].title

    def named(self, thread_id: str, name: str | None) -> None:
        found = self._threads.get(thread_id)
        if found is not None and name:
            found[0].title = " ".join(name.split())

    def lost(self) -> None:
        """Codex is gone: every state is unknown until it is back."""
        self.codex_lost = True
        for _line, record in self._threads.values():
            record.work.lost = True

    def back(self) -> None:
        self.codex_lost = False
        for _line, record in self._threads.values():
            record.work.lost = False

    def lines(self) -> list[ThreadLine]:
        """Every thread, parents before their children, newest roots first."""
        return [self._line(line, record) for line, record in self._threads.values()]

    def line(self, thread_id: str) -> ThreadLine | None:
        """One thread, as :meth:`lines` shows it."""
        found = self._threads.get(thread_id)
        return self._line(*found) if found is not None else None

    def _line(self, line: ThreadLine, record: ThreadRecord) -> ThreadLine:
        line = _line(line, record)
        if self._machine_of is not None:
            line.machine = self._machine(line.threadId)
        return line

    def _machine(self, thread_id: str) -> str:
        """Its own pick, else its root's (Codex starts a sub-agent where its parent works)."""
        assert self._machine_of is not None
        seen: set[str] = set()
        current: str | None = thread_id
        while current is not None and current not in seen:
            seen.add(current)
            picked = self._machine_of(current)
            if picked is not None:
                return picked
            found = self._threads.get(current)
            current = found[0].parentThreadId if found is not None else None
        return "local"

    def loaded(self, thread_id: str) -> bool:
        """Whether Codex holds the thread in memory (its status is other than ``notLoaded``)."""
        found = self._threads.get(thread_id)
        status = found[1].work.status if found is not None else None
        return status is not None and status.type != "notLoaded"


def _limit_from_environment() -> int:
    try:
        return max(int(os.environ.get(ENV_MAX_THREADS, MAX_THREADS)), 1)
    except ValueError:
        return MAX_THREADS


def _tree(root: str, children: dict[str, list[str]]) -> list[str]:
    """``root`` and every thread under it."""
    tree, todo, seen = [], [root], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def _line(line: ThreadLine, record: ThreadRecord) -> ThreadLine:
    state = workstate.snapshot(record)
    line.state = state.state
    flags = record.work.status.flags if record.work.status is not None else frozenset()
    line.waitingOn = sorted(WAITS_ON[f] for f in flags if f in WAITS_ON)
    meta = state.meta if isinstance(state.meta, dict) else {}
    line.error = meta.get("error")
    return line


def _status(status: dict[str, Any]) -> Status | None:
    kind = status.get("type")
    if not isinstance(kind, str):
        return None
    flags = status.get("activeFlags")
    return Status(kind, frozenset(f for f in flags or [] if isinstance(f, str)))


def _roots(stored: Thread) -> list[str] | None:
    """The thread's folders, ``cwd`` first, where Codex reports them (its environment here,
    experimental): ``None`` when it does not."""
    for environment in stored.environments or ():
        roots = environment.runtimeWorkspaceRoots
        if environment.environmentId == "local" and isinstance(roots, list):
            return roots
    return None
