"""What the daemon's page shows, and which of its actions go to Codex (pure: no I/O, no clock).

The daemon's watcher connection (:mod:`bridge.daemon.observer`) hands the board what
Codex says: every notification, every request Codex asks the watcher (an approval, a
question), the answers to the watcher's own ``thread/resume``. The board keeps, beside
the daemon's :class:`~bridge.daemon.picture.Picture` of every thread:

- per thread: since when it is in its state, the model, the last line it said, its
  tokens, its running turn (for cancel), how its last turn ended, and the tail of its
  transcript (the last :data:`TAIL_ENTRIES` items, each cut to :data:`TAIL_CHARS`);
- the inbox (:mod:`.inbox`): every request waiting on a person, oldest first;
- Codex's rate-limit windows.

A page is sent :meth:`Board.hello` when it connects, then :meth:`Board.update` (only what
changed since what that page was last sent; ``None`` when nothing did). What a page asks
(:meth:`Board.action`) is checked: an answer by the inbox, a cancel must name a thread whose
turn runs, a thread to watch must be known.

With no page open the board ignores the stream (items, deltas, usage): the daemon does no
work for a page nobody looks at. :meth:`Board.subscriptions` says which threads the watcher
must ``thread/resume`` (every loaded thread while a page is open: Codex sends a thread's
items and approvals only to connections subscribed to it) and which it may leave.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..picture import Picture
from .actions import Action, AnswerAction, CancelAction, Refused, WatchAction
from .inbox import KINDS, Answer, Asked, Inbox
from .transcript import TAIL_CHARS, TAIL_ENTRIES, Entry, append, changes, find, item_text, last_line

#: File changes in progress remembered (for their approval's diff).
MAX_CHANGES = 256


@dataclass
class _Thread:
    since: float = 0.0
    model: str = ""
    last_line: str = ""
    tokens: int | None = None
    context_window: int | None = None
    turn_id: str | None = None
    ended: str = ""
    tail: deque[Entry] = field(default_factory=lambda: deque(maxlen=TAIL_ENTRIES))
    #: The board's version when its row, and its tail, last changed.
    version: int = 0
    tail_version: int = 0


@dataclass
class View:
    """What one open page was sent last (the board's versions, its rows)."""

    version: int = -1
    picture: int = -1
    inbox: int = -1
    limits: int = -1
    machines: int = -1
    watched: str | None = None
    tail: int = -1
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)


# -- what a page's action comes to -----------------------------------------------------


class Interrupt(msgspec.Struct, frozen=True):
    """``turn/interrupt`` of ``thread_id``'s running turn."""

    thread_id: str
    turn_id: str


class Watch(msgspec.Struct, frozen=True):
    """The page shows this thread's transcript tail (``None``: none)."""

    thread_id: str | None


Outcome = Answer | Interrupt | Watch | Refused


class Board:
    def __init__(self, picture: Picture) -> None:
        self.picture = picture
        self.pages = 0
        self._version = 0
        self._picture_version = 0
        self._inbox_version = 0
        self._limits_version = 0
        self._machines_version = 0
        self._machines: list[dict[str, Any]] = []
        self._threads: dict[str, _Thread] = {}
        self._inbox = Inbox(self._inbox_changed)
        #: A file change's paths and diffs (``item/started``), until its approval is asked.
        self._changes: dict[str, list[dict[str, Any]]] = {}
        self._limits: dict[str, Any] = {}
        #: Threads the watcher is subscribed to (``thread/resume`` answered).
        self.subscribed: set[str] = set()
        self._resuming: set[str] = set()
        #: Threads whose resume failed (never prompted: no rollout), until their status changes.
        self._failed: set[str] = set()
        #: Threads whose status changed while their resume was asked: its failure is older than
        #: the change (the thread may have a rollout now), so it is asked again.
        self._changed_while_resuming: set[str] = set()

    def census(self) -> dict[str, int]:
        """What it holds, for the daemon's census (``bench/soak.py``)."""
        return {
            "pictureThreads": len(self.picture),
            "boardRows": len(self._threads),
            "subscribed": len(self.subscribed),
            "inbox": len(self._inbox),
        }

    @property
    def version(self) -> int:
        """Grows with every change a page may be sent."""
        return self._version

    def machines_changed(self, machines: list[dict[str, Any]]) -> None:
        """The daemon's machines and their links' states (``daemon.json``'s ``machines``)."""
        if machines != self._machines:
            self._machines = machines
            self._version += 1
            self._machines_version = self._version

    # -- Codex --------------------------------------------------------------------------

    def _thread(self, thread_id: str) -> _Thread:
        found = self._threads.get(thread_id)
        if found is None:
            found = self._threads[thread_id] = _Thread()
        return found

    def _touch(self, thread: _Thread, *, tail: bool = False) -> None:
        self._version += 1
        thread.version = self._version
        if tail:
            thread.tail_version = self._version

    def picture_changed(self) -> None:
        """The picture changed (a thread seen, named, its status, forgotten): every row is
        checked, and the rows of threads the picture forgot go with them."""
        self._version += 1
        self._picture_version = self._version
        gone = self.picture.take_forgotten()
        if len(self._threads) > self.picture.limit:
            # Rows kept from the picture of a Codex before this one (a restart): those it
            # does not know again go, so the rows stay as few as the picture's threads.
            gone += [t for t in self._threads if t not in self.picture]
        for thread_id in gone:
            self._threads.pop(thread_id, None)
            self._failed.discard(thread_id)
            self._resuming.discard(thread_id)
            self._changed_while_resuming.discard(thread_id)
            self._inbox.drop_thread(thread_id)

    def notification(self, method: str, params: Any, now: float) -> None:
        """A notification from Codex (``params`` decoded)."""
        if not isinstance(params, dict):
            return
        thread_id = params.get("threadId")
        if method == "thread/status/changed" and isinstance(thread_id, str):
            thread = self._thread(thread_id)
            thread.since = now
            self._failed.discard(thread_id)
            if thread_id in self._resuming:
                self._changed_while_resuming.add(thread_id)
            self._touch(thread)
            return
        if method == "serverRequest/resolved":
            self._inbox.resolved(params.get("requestId"))
            return
        if method == "account/rateLimits/updated":
            limits = params.get("rateLimits")
            if isinstance(limits, dict):
                # A sparse update: what it leaves out stays as it was.
                self._limits.update({k: v for k, v in limits.items() if v is not None})
                self._version += 1
                self._limits_version = self._version
            return
        if not self.pages or not isinstance(thread_id, str):
            return
        if method == "item/agentMessage/delta":
            self._delta(thread_id, params, "agentMessage")
        elif method == "item/commandExecution/outputDelta":
            self._delta(thread_id, params, "commandExecution")
        elif method in ("item/started", "item/completed"):
            item = params.get("item")
            if isinstance(item, dict):
                self._item(thread_id, item, done=method == "item/completed")
        elif method == "turn/started":
            thread = self._thread(thread_id)
            thread.turn_id = _turn_id(params)
            thread.ended = ""
            self._touch(thread)
        elif method == "turn/completed":
            thread = self._thread(thread_id)
            turn = params.get("turn")
            thread.turn_id = None
            thread.ended = str(turn.get("status") or "") if isinstance(turn, dict) else ""
            self._touch(thread)
        elif method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            if isinstance(usage, dict):
                thread = self._thread(thread_id)
                total = usage.get("total")
                if isinstance(total, dict) and isinstance(total.get("totalTokens"), int):
                    thread.tokens = total["totalTokens"]
                window = usage.get("modelContextWindow")
                thread.context_window = window if isinstance(window, int) else None
                self._touch(thread)

    def _delta(self, thread_id: str, params: dict[str, Any], kind: str) -> None:
        item_id, delta = params.get("itemId"), params.get("delta")
        if not isinstance(item_id, str) or not isinstance(delta, str):
            return
        thread = self._thread(thread_id)
        entry = find(thread.tail, item_id) or append(thread.tail, Entry(item_id, kind))
        entry.text = (entry.text + delta)[-TAIL_CHARS:]
        if kind == "agentMessage":
            thread.last_line = last_line(entry.text)
        self._touch(thread, tail=True)

    def _item(self, thread_id: str, item: dict[str, Any], *, done: bool) -> None:
        kind, item_id = item.get("type"), item.get("id")
        if not isinstance(kind, str) or not isinstance(item_id, str):
            return
        if kind == "fileChange":
            if done:
                self._changes.pop(item_id, None)
            else:
                self._changes[item_id] = changes(item.get("changes"))
                while len(self._changes) > MAX_CHANGES:  # a change that never completed
                    del self._changes[next(iter(self._changes))]
        text = item_text(kind, item)
        if text is None:
            return
        thread = self._thread(thread_id)
        entry = find(thread.tail, item_id) or append(thread.tail, Entry(item_id, kind))
        if done or not entry.text:
            # Deltas grew it until now; the completed item says it whole.
            entry.text = text[-TAIL_CHARS:]
        entry.status = str(item.get("status") or "")
        if kind == "agentMessage" and entry.text:
            thread.last_line = last_line(entry.text)
        self._touch(thread, tail=True)

    def request(self, request_id: int | str, method: str, params: Any, now: float) -> bool:
        """Codex asks the watcher something; ``False`` when it is nothing the page answers."""
        kind = KINDS.get(method)
        if kind is None or not isinstance(params, dict):
            return False
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            return False
        asked_at = self._inbox.asked_at(request_id)  # asked again (re-sent): it keeps its place
        if asked_at is None:
            # Sent when the page's watcher subscribed: asked when the thread began to wait.
            line = self.picture.line(thread_id)
            since = self._threads[thread_id].since if thread_id in self._threads else 0.0
            asked_at = since if line is not None and line.waitingOn and since else now
        changes = self._changes.get(str(params.get("itemId")), [])
        self._inbox.ask(Asked(request_id, kind, thread_id, asked_at, params, changes))
        return True

    def _inbox_changed(self) -> None:
        self._version += 1
        self._inbox_version = self._version

    def resumed(self, thread_id: str, result: Any) -> None:
        """The watcher's ``thread/resume`` of ``thread_id`` answered ``result``."""
        self._resuming.discard(thread_id)
        self._changed_while_resuming.discard(thread_id)
        self.subscribed.add(thread_id)
        if not isinstance(result, dict):
            return
        thread = self._thread(thread_id)
        if isinstance(result.get("model"), str):
            thread.model = result["model"]
        stored = result.get("thread")
        turns = stored.get("turns") if isinstance(stored, dict) else None
        if isinstance(turns, list) and turns and isinstance(turns[-1], dict):
            last = turns[-1]
            running = last.get("status") == "inProgress"
            thread.turn_id = str(last.get("id")) if running else None
            thread.ended = "" if running else str(last.get("status") or "")
            for item in last.get("items") or []:
                if isinstance(item, dict):  # Codex stores an item once it is done
                    self._item(thread_id, item, done=True)
        self._touch(thread, tail=True)

    def resume_failed(self, thread_id: str) -> None:
        self._resuming.discard(thread_id)
        if thread_id in self._changed_while_resuming:
            self._changed_while_resuming.discard(thread_id)
            return  # its status changed since it was asked: asked again
        # Not tried again until its status changes (a thread never prompted has no rollout).
        self._failed.add(thread_id)

    def unsubscribed(self, thread_id: str) -> None:
        self.subscribed.discard(thread_id)
        thread = self._threads.get(thread_id)
        if thread is not None:
            thread.tail.clear()
            thread.turn_id = None
        # No longer told when its requests are answered: a resume asks them again.
        self._inbox.drop_thread(thread_id)

    def lost(self) -> None:
        """The watcher's connection ended: nothing it was asked can be answered on it."""
        self.subscribed.clear()
        self._resuming.clear()
        self._changed_while_resuming.clear()
        self._changes.clear()
        self._inbox.clear()
        for thread in self._threads.values():
            thread.turn_id = None

    def subscriptions(self) -> tuple[list[str], list[str]]:
        """Threads to ``thread/resume`` now, and threads to ``thread/unsubscribe``.

        With a page open: every loaded thread (a thread Codex has not loaded stays so), and
        none the picture no longer shows.
        With none: the subscribed ones, except a thread whose turn runs (left when it ends:
        a thread whose last subscriber leaves may be unloaded by Codex).
        """
        statuses = {line.threadId: line for line in self.picture.lines()}
        if self.pages:
            resume = [
                thread_id
                for thread_id, line in statuses.items()
                if thread_id not in self.subscribed
                and thread_id not in self._resuming
                and thread_id not in self._failed
                and self.picture.loaded(thread_id)
                and line.state != "unknown"
            ]
            self._resuming.update(resume)
            # A thread the picture forgot (at rest for long, deleted, archived) is left.
            return resume, sorted(t for t in self.subscribed if t not in statuses)
        busy = ("running", "requires_action")
        leave = [
            thread_id
            for thread_id in self.subscribed
            if thread_id not in statuses or statuses[thread_id].state not in busy
        ]
        return [], sorted(leave)

    # -- the page -----------------------------------------------------------------------

    def opened(self) -> View:
        self.pages += 1
        return View()

    def closed(self) -> None:
        self.pages = max(self.pages - 1, 0)

    def hello(self, view: View, daemon: dict[str, Any]) -> dict[str, Any]:
        """Everything, for a page that just connected."""
        message = self.update(view) or {}
        message.update(type="hello", daemon=daemon)
        message.setdefault("threads", [])
        message.setdefault("inbox", [])
        return message

    def update(self, view: View) -> dict[str, Any] | None:
        """What changed for this page since ``view``; ``None`` when nothing did."""
        if view.version == self._version:
            return None
        message: dict[str, Any] = {"type": "update"}
        lines: dict[str, Any] = {}
        if view.picture < self._picture_version:
            lines = {line.threadId: line for line in self.picture.lines()}
            changed: Iterable[str] = lines
            gone = [thread_id for thread_id in view.rows if thread_id not in lines]
            for thread_id in gone:
                del view.rows[thread_id]
            if gone:
                message["gone"] = gone
        else:
            changed = [
                thread_id
                for thread_id, thread in self._threads.items()
                if thread.version > view.version and thread_id in self.picture
            ]
            for thread_id in changed:
                one = self.picture.line(thread_id)
                if one is not None:
                    lines[thread_id] = one
        rows = []
        for thread_id in changed:
            line = lines.get(thread_id)
            if line is None:
                continue
            row = self._row(line)
            if view.rows.get(thread_id) != row:
                view.rows[thread_id] = row
                rows.append(row)
        if rows:
            message["threads"] = rows
        if view.inbox < self._inbox_version:
            message["inbox"] = self._inbox.wire()
        if view.limits < self._limits_version:
            message["limits"] = self._limits
        if view.machines < self._machines_version:
            message["machines"] = self._machines
        watched = self._threads.get(view.watched) if view.watched else None
        if watched is not None and view.tail < watched.tail_version:
            message["tail"] = {
                "threadId": view.watched,
                "entries": [entry.wire() for entry in watched.tail],
            }
            view.tail = watched.tail_version
        view.version = self._version
        view.picture = self._picture_version
        view.inbox = self._inbox_version
        view.limits = self._limits_version
        view.machines = self._machines_version
        return message if len(message) > 1 else None

    def _row(self, line: Any) -> dict[str, Any]:
        row = msgspec.to_builtins(line)
        thread = self._threads.get(line.threadId)
        if thread is not None:
            row.update(
                since=thread.since or None,
                model=thread.model or line.model,
                lastLine=thread.last_line,
                tokens=thread.tokens,
                contextWindow=thread.context_window,
                ended=thread.ended,
                cancellable=thread.turn_id is not None,
            )
        return {k: v for k, v in row.items() if v not in (None, "", [])}

    def action(self, view: View, action: Action) -> Outcome:
        """What a page asks (read by :func:`~.actions.read_action`), checked."""
        if isinstance(action, WatchAction):
            thread_id = action.threadId
            if thread_id is not None and thread_id not in self.picture:
                return Refused("no such thread")
            view.watched, view.tail = thread_id, -1
            # The next update carries its tail.
            self._version += 1
            return Watch(thread_id)
        if isinstance(action, CancelAction):
            thread = self._threads.get(action.threadId)
            if thread is None or thread.turn_id is None:
                return Refused("that thread runs no turn")
            return Interrupt(action.threadId, thread.turn_id)
        assert isinstance(action, AnswerAction)
        return self._inbox.answer(action)

    def answer_failed(self, request_id: int | str) -> None:
        """The answer could not go to Codex (it is away): the request is gone with it."""
        self._inbox.resolved(request_id)


def _turn_id(params: dict[str, Any]) -> str | None:
    turn = params.get("turn")
    turn_id = turn.get("id") if isinstance(turn, dict) else None
    return turn_id if isinstance(turn_id, str) else None
