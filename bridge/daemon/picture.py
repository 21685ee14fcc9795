"""The daemon's live picture of every thread of its Codex (pure: events in, a snapshot out).

Fed what the daemon's observer connection learns (``thread/list``, ``thread/read``,
``thread/started``, ``thread/status/changed``, ``thread/name/updated``, Codex lost),
it keeps one line per thread: its parent, title, cwd, age, and its work state
(``running`` / ``requires_action`` / ``idle`` / ``unknown``), computed by the
same function the bridge uses for sub-agents (:func:`bridge.engine.core.workstate.snapshot`).
``codex-acp-bridge status`` shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..codex.types import Thread
from ..engine.core import workstate
from ..engine.core.threads import Status, ThreadRecord

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
    nickname: str | None = None
    model: str | None = None
    createdAt: int | None = None
    updatedAt: int | None = None
    #: The machine it works on (a daemon with machines); a sub-agent works on its root's.
    machine: str | None = None


class Picture:
    """Every thread the daemon's Codex knows, with its current state."""

    def __init__(self, machine_of: Callable[[str], str | None] | None = None) -> None:
        """``machine_of``: the machine a thread was put on (the bridge's store), ``None``
        for this machine; without it, no thread says a machine."""
        self._machine_of = machine_of
        self._threads: dict[str, tuple[ThreadLine, ThreadRecord]] = {}
        #: Ephemeral threads: Codex's own helpers (the TUI titles a thread in one), not the
        #: user's; known, so their status changes do not send the watcher to read them.
        self._ephemeral: set[str] = set()
        self.codex_lost = False

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._threads or thread_id in self._ephemeral

    def seen(self, stored: Thread) -> None:
        """A thread as ``thread/list``, ``thread/read`` or ``thread/started`` describe it."""
        if stored.ephemeral:
            self._ephemeral.add(stored.id)
            return
        known = self._threads.get(stored.id)
        line, record = known or (ThreadLine(threadId=stored.id, state=""), ThreadRecord(stored.id))
        line.parentThreadId = stored.parentThreadId
        line.title = " ".join((stored.name or stored.preview or "").split())
        line.cwd = stored.cwd
        line.nickname = stored.agentNickname
        line.model = stored.model or line.model
        line.updatedAt = stored.updatedAt
        # A known thread's status comes from thread/status/changed, newer than any read.
        if isinstance(stored.status, dict) and (known is None or record.status is None):
            record.status = _status(stored.status)
        self._threads[stored.id] = (line, record)

    def status(self, thread_id: str, status: dict[str, Any]) -> bool:
        """``thread/status/changed``; ``False`` when the thread is not known yet."""
        found = self._threads.get(thread_id)
        if found is None:
            return thread_id in self._ephemeral
        found[1].status = _status(status)
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
            record.lost = True

    def back(self) -> None:
        self.codex_lost = False
        for _line, record in self._threads.values():
            record.lost = False

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
        status = found[1].status if found is not None else None
        return status is not None and status.type != "notLoaded"


def _line(line: ThreadLine, record: ThreadRecord) -> ThreadLine:
    state = workstate.snapshot(record)
    line.state = state.state
    flags = record.status.flags if record.status is not None else frozenset()
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
