"""Codex app-server thread methods behind the ACP session lifecycle:
``thread/read``, ``thread/resume``, ``thread/fork``, ``thread/list``,
``thread/unsubscribe`` (Codex 0.169).

Same conventions as :mod:`bridge.codex.types`: only the members the bridge
uses, unknown fields ignored, items kept raw (their translation decides what
it understands).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..wire import WireStruct as _Base
from .types import Page, PageParams, Thread, Turn


class ThreadReadParams(_Base):
    threadId: str
    includeTurns: bool = False


class ThreadReadResult(_Base):
    thread: Thread


#: A stored thread's turns, a page at a time (Codex 0.169 on).
LIST_TURNS = "thread/turns/list"


class ThreadTurnsListParams(PageParams):
    """A page of a stored thread's turns, oldest first when ``sortDirection`` is ``asc``."""

    threadId: str
    #: ``asc``: oldest first (Codex's default is newest first).
    sortDirection: str | UnsetType = UNSET
    #: ``full``: every stored item (Codex's default, ``summary``, leaves most out).
    itemsView: str | UnsetType = UNSET


class ThreadTurnsListResult(Page[Turn]):
    pass


#: A stored thread's items, a page at a time, across its turns (0.169 on). Codex reads them
#: from its history store: a page costs it a small fraction of a ``full`` page of turns,
#: which it reads from the thread file. A thread it has no such history of is refused
#: -32601 ``thread/items/list is not supported yet``.
LIST_ITEMS = "thread/items/list"


class ThreadItemsListParams(PageParams):
    """A page of a stored thread's items (Codex gives at most 100 a page, whatever the
    ``limit``)."""

    threadId: str
    #: ``asc`` (Codex's default): oldest first.
    sortDirection: str | UnsetType = UNSET


class ThreadItemEntry(_Base):
    item: Raw
    #: The turn holding the item.
    turnId: str


class ThreadItemsListResult(Page[ThreadItemEntry]):
    pass


class _ThreadOpenParams(_Base):
    """What ``thread/resume`` and ``thread/fork`` both take: a stored thread to open."""

    threadId: str
    cwd: str | UnsetType = UNSET
    config: dict[str, Any] | UnsetType = UNSET
    #: The bridge reads the history with ``thread/read``: the answer need not carry it.
    excludeTurns: bool = False
    #: The thread's folders, ``cwd`` first (experimental; see ``ThreadStartParams``).
    runtimeWorkspaceRoots: list[str] | UnsetType = UNSET


class ThreadResumeParams(_ThreadOpenParams):
    pass


class ThreadForkParams(_ThreadOpenParams):
    #: Fork through this turn (inclusive): the later ones are left out.
    lastTurnId: str | UnsetType = UNSET


class ThreadListParams(PageParams):
    cwd: str | UnsetType = UNSET
    #: ``created_at`` (Codex's default), ``updated_at``, ...
    sortKey: str | UnsetType = UNSET
    #: ``True``: archived threads only; left out, the others only.
    archived: bool | UnsetType = UNSET
    #: ``True``: from Codex's index alone, without reading every stored thread file to
    #: repair it (a file it has not indexed is then left out).
    useStateDbOnly: bool | UnsetType = UNSET
    #: Only the sub-agents spawned under this thread, at any depth (not the thread itself).
    ancestorThreadId: str | UnsetType = UNSET
    #: Only threads from these sources (left out: the interactive ones, no sub-agent).
    sourceKinds: list[str] | UnsetType = UNSET


class ThreadListResult(Page[Thread]):
    pass


#: Every source kind of a sub-agent thread (``thread/list``'s ``sourceKinds``).
SUBAGENT_SOURCE_KINDS = [
    "subAgent",
    "subAgentReview",
    "subAgentCompact",
    "subAgentThreadSpawn",
    "subAgentOther",
]


class ThreadLoadedListParams(PageParams):
    """``thread/loaded/list``: the threads Codex holds in memory (experimental)."""


class ThreadLoadedListResult(Page[str]):
    pass


class ThreadUnsubscribeParams(_Base):
    threadId: str


class ThreadGone(_Base):
    """``thread/deleted``, ``thread/archived``, ``thread/closed`` (unloaded): which thread."""

    threadId: str


# -- background terminals (experimental API) ------------------------------------------------

#: The commands a thread still runs, and stopping one (not every Codex has them).
LIST_BACKGROUND_TERMINALS = "thread/backgroundTerminals/list"
TERMINATE_BACKGROUND_TERMINAL = "thread/backgroundTerminals/terminate"


class BackgroundTerminalsListParams(_Base):
    """``thread/backgroundTerminals/list``: the commands the thread still runs (experimental)."""

    threadId: str


class BackgroundTerminal(_Base):
    #: The ``commandExecution`` item the command is.
    itemId: str
    processId: str
    #: The command as the model gave it (no shell wrapper).
    command: str
    cwd: str = ""


class BackgroundTerminalsListResult(Page[BackgroundTerminal]):
    #: A result without ``data`` reads as none running.
    data: list[BackgroundTerminal] = msgspec.field(default_factory=list)


class BackgroundTerminalsCleanParams(_Base):
    """``thread/backgroundTerminals/clean``: stop every command the thread left running
    (experimental; the answer is ``{}``)."""

    threadId: str


# -- Codex 0.169's words for a thread it holds but never stored (never prompted) ---------------

#: ``thread/resume`` of a thread Codex holds but never wrote to ``CODEX_HOME``, while no
#: connection is subscribed to it; also of a thread it neither holds nor stored.
NO_ROLLOUT = "no rollout found"
#: ``thread/read {includeTurns}`` and ``thread/resume`` of a thread Codex holds and has no
#: turn of: -32601, though the methods exist. The read writes the thread's rollout first,
#: and the resume subscribes the connection first: both did their work.
NO_TURNS = "list_turns is not supported yet"
#: -32601, the code Codex gives :data:`NO_TURNS`.
NO_TURNS_CODE = -32601


#: How Codex refuses a request (``turn/start``) for a thread it does not hold: one deleted
#: meanwhile (another window's ``session/delete``), before this connection heard of it.
THREAD_NOT_FOUND = "thread not found: "


def no_turns(code: int, message: str) -> bool:
    """Codex holds the thread but has no turn of it to list (see :data:`NO_TURNS`)."""
    return code == NO_TURNS_CODE and message.startswith(NO_TURNS)
