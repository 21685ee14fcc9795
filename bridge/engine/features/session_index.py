"""Feature: the session index, for a client that declared AIR's ``sessionIndex``.

``session/list`` rows gain what a session index shows (``_meta.jetbrains.air``:
``archived``, ``lastPromptAt``, ``lastTurnEndedAt``, ``state``, ``model``,
``forkedFrom``), and the client is pushed ``_session/list_changed {cwd}`` when a row
of a ``cwd`` it listed changes, so it reads page 1 again instead of polling.

The picture is the bridge's own, kept true from what Codex sends every connection
(so, on a shared Codex, every window's threads too) and never from Codex's files:

- ``state`` comes from Codex's thread status: ``thread/status/changed`` reaches every
  connection, and ``thread/list`` reports it for each loaded thread. ``active``
  waiting on an approval or on the user's input is ``requires_action``, otherwise
  ``running``; ``idle`` is ``idle``. A thread not loaded (or in a system error) has
  no state to report and its row says none (never ``unknown``).
- ``lastPromptAt`` is Codex's ``recencyAt`` (moved when a turn starts, its list
  order); ``lastTurnEndedAt`` the ``completedAt`` of the last ``turn/completed`` seen
  on this connection (Codex keeps no such time for a thread).
- A push goes out when a thread's state changes, a turn ends, a thread starts or is
  renamed, for a ``cwd`` whose page 1 the client read (at most :data:`WATCHED` of
  them, the oldest forgotten first). A sub-agent's thread is no row and pushes
  nothing. Nothing else is sent and nothing is kept for a client that did not
  declare the capability.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ...acp import air
from ...acp import sessions as acp_sessions
from ...codex import items as codex_items
from ...codex import threads as codex_threads
from ...codex import types as codex_types
from ..core.hub import Hub
from ..core.workstate import WAITING_FLAGS

#: How many listed ``cwd``s are watched for changes.
WATCHED = 32


def row_state(status: object) -> str | None:
    """Codex's thread status (``{type, activeFlags?}``) as a row's ``state``, if any."""
    if not isinstance(status, dict):
        return None
    kind = status.get("type")
    if kind == "idle":
        return "idle"
    if kind != "active":
        return None
    flags = status.get("activeFlags")
    if isinstance(flags, list) and WAITING_FLAGS.intersection(flags):
        return "requires_action"
    return "running"


def iso_time(unix_seconds: int) -> str:
    """Unix seconds as ISO 8601 in UTC, as ``session/list`` writes ``updatedAt``."""
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SessionIndex:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Each thread's row state as last known (``None``: none to report).
        self._states: dict[str, str | None] = {}
        #: ``completedAt`` of each thread's last turn seen.
        self._ended: dict[str, int] = {}
        #: Each root thread's ``cwd``, as listed or started.
        self._cwds: dict[str, str] = {}
        #: The ``cwd``s whose page 1 the client read, oldest first.
        self._watched: dict[str, None] = {}

    @property
    def on(self) -> bool:
        return self.hub.declares(air.SESSION_INDEX)

    # -- the rows ----------------------------------------------------------------------

    def rows(
        self,
        params: acp_sessions.ListSessionsParams,
        threads: list[codex_threads.StoredThread],
        rows: list[acp_sessions.SessionInfo],
        archived: bool,
    ) -> None:
        """Decorate the rows of one ``session/list`` page (``rows[i]`` is ``threads[i]``)."""
        if not self.on:
            return
        for thread, row in zip(threads, rows, strict=True):
            self._cwds[thread.id] = thread.cwd
            state = row_state(thread.status)
            if state is not None or thread.id not in self._states:
                # The list is a fresh read of a loaded thread's status.
                self._states[thread.id] = state
            else:
                state = self._states[thread.id]
            fields: dict[str, Any] = {"archived": archived}
            if thread.recencyAt is not None:
                fields["lastPromptAt"] = iso_time(thread.recencyAt)
            ended = self._ended.get(thread.id)
            if ended is not None:
                fields["lastTurnEndedAt"] = iso_time(ended)
            if state is not None:
                fields["state"] = state
            if thread.model:
                fields["model"] = thread.model
            if thread.forkedFromId:
                fields["forkedFrom"] = thread.forkedFromId
            row.meta = air.meta(fields)
        if params.cwd is not None and params.cursor is None:
            self._watched.pop(params.cwd, None)
            self._watched[params.cwd] = None
            while len(self._watched) > WATCHED:
                del self._watched[next(iter(self._watched))]

    # -- what Codex says of any thread (before the session gate) ---------------------------

    def status_changed(self, note: codex_types.ThreadStatusChanged) -> None:
        if not self.on:
            return
        state = row_state({"type": note.status.type, "activeFlags": note.status.activeFlags})
        if self._states.get(note.threadId) != state or note.threadId not in self._states:
            self._states[note.threadId] = state
            self._changed(note.threadId)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        if not self.on or note.turn.completedAt is None:
            return
        self._ended[note.threadId] = note.turn.completedAt
        self._changed(note.threadId)

    def thread_started(self, note: codex_types.ThreadStarted) -> None:
        thread = note.thread
        if not self.on or thread.parentThreadId is not None or not isinstance(thread.cwd, str):
            return
        self._cwds[thread.id] = thread.cwd
        self._changed(thread.id)

    def name_updated(self, note: codex_items.ThreadNameUpdated) -> None:
        if self.on:
            self._changed(note.threadId)

    def _changed(self, thread_id: str) -> None:
        record = self.hub.threads.get(thread_id)
        if record is not None:
            if record.parent_id is not None:
                return  # a sub-agent: no row of the list
            cwd: str | None = record.cwd
        else:
            cwd = self._cwds.get(thread_id)
        if cwd and cwd in self._watched:
            self.hub.client_notification(air.LIST_CHANGED, air.ListChangedParams(cwd=cwd))

    def forget(self, thread_id: str) -> None:
        """A deleted thread: nothing of it is kept."""
        self._states.pop(thread_id, None)
        self._ended.pop(thread_id, None)
        self._cwds.pop(thread_id, None)
