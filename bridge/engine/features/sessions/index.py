"""Feature: the session index, for a client that declared AIR's ``sessionIndex`` or
the session-list extensions proposal's ``session.listChanged``.

``session/list`` rows gain what a session index shows (``lastPromptAt``,
``lastTurnEndedAt``, ``state``, ``model``, ``forkedFrom``), and the client is pushed a
change hint ``{cwd}`` when a row of a ``cwd`` it listed changes, so it reads page 1
again instead of polling. One picture, two renderings:

- AIR: the fields (and ``archived``) in the row's ``_meta.jetbrains.air``, the hint
  ``_session/list_changed``;
- the proposal (agentclientprotocol's ``docs/rfds/session-list-extensions.mdx``): a
  client declaring ``session.listChanged: {}`` (v1 ``clientCapabilities``, v2
  ``capabilities``) is told ``list: {changes: {}}`` (v1 ``sessionCapabilities``, v2
  ``capabilities.session``), gets the fields at the row's top level and the hint as
  ``session/list_changed``. Its subscription (``session/list/subscribe``) and ``limit``
  are not offered.

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
- A thread deleted or archived is pushed as a change, then forgotten; a thread Codex
  closed (unloaded) has no state any more. So the picture holds what the rows show,
  not every thread ever seen.
"""

from __future__ import annotations

from typing import Any

from ....acp import air
from ....acp import sessions as acp_sessions
from ....codex import items as codex_items
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ...core.hub import Hub
from ...core.workstate import WAITING_FLAGS
from ...views.stored_sessions import iso_time

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


def listed(client_session: Any) -> bool:
    """The client's ``session`` capabilities hold the proposal's ``listChanged: {}``."""
    return isinstance(client_session, dict) and isinstance(
        client_session.get(LIST_CHANGED_CAPABILITY), dict
    )


#: The proposal's client capability, and its hint.
LIST_CHANGED_CAPABILITY = "listChanged"
LIST_CHANGED = "session/list_changed"


class SessionIndex:
    """Each thread's row state and times, kept from Codex's news, and the change feed
    (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: The client declared the session-list proposal's ``listChanged``.
        self.listed = False
        #: Each thread's row state as last known (absent: none to report).
        self._states: dict[str, str] = {}
        #: ``completedAt`` of each thread's last turn seen.
        self._ended: dict[str, int] = {}
        #: Each root thread's ``cwd``, as listed or started.
        self._cwds: dict[str, str] = {}
        #: The ``cwd``s whose page 1 the client read, oldest first.
        self._watched: dict[str, None] = {}

    @property
    def on(self) -> bool:
        return self.listed or self.hub.declares(air.SESSION_INDEX)

    def advertise(self, caps: Any, client_session: Any) -> None:
        """At ``initialize``: ``list.changes`` for a client that declared ``listChanged``
        (v1's ``sessionCapabilities`` is a dict, v2's ``session`` a Struct)."""
        self.listed = listed(client_session)
        if not self.listed:
            return
        if isinstance(getattr(caps, "sessionCapabilities", None), dict):
            session_caps = caps.sessionCapabilities
            session_caps["list"] = {**session_caps.get("list", {}), "changes": {}}
        else:
            caps.session.list = {"changes": {}}

    def known(self) -> set[str]:
        """Every thread something is kept of (what deleting them must empty)."""
        return {*self._states, *self._ended, *self._cwds}

    # -- the rows ----------------------------------------------------------------------

    def rows(
        self,
        params: acp_sessions.ListSessionsParams,
        threads: list[codex_types.Thread],
        rows: list[acp_sessions.SessionInfo],
        archived: bool,
    ) -> None:
        """Decorate the rows of one ``session/list`` page (``rows[i]`` is ``threads[i]``)."""
        if not self.on:
            return
        to_air = self.hub.declares(air.SESSION_INDEX)
        for thread, row in zip(threads, rows, strict=True):
            self._cwds[thread.id] = thread.cwd
            state = row_state(thread.status)
            if state is not None:
                # The list is a fresh read of a loaded thread's status.
                self._states[thread.id] = state
            else:
                state = self._states.get(thread.id)
            fields: dict[str, Any] = {}
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
            if to_air:
                row.meta = air.meta({"archived": archived, **fields})
            if self.listed:
                for name, value in fields.items():
                    setattr(row, name, value)
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
        if self._states.get(note.threadId) != state:
            if state is None:
                del self._states[note.threadId]
            else:
                self._states[note.threadId] = state
            self._changed(note.threadId)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        if not self.on or note.turn.completedAt is None:
            return
        self._ended[note.threadId] = note.turn.completedAt
        self._changed(note.threadId)

    def thread_started(self, note: codex_types.ThreadStarted) -> None:
        thread = note.thread
        if not self.on or thread.parentThreadId is not None or not thread.cwd:
            return
        self._cwds[thread.id] = thread.cwd
        self._changed(thread.id)

    def name_updated(self, note: codex_items.ThreadNameUpdated) -> None:
        if self.on:
            self._changed(note.threadId)

    def _changed(self, thread_id: str) -> None:
        record = self.hub.threads.get(thread_id)
        if record is not None and record.parent_id is not None:
            return  # a sub-agent: no row of the list
        # A record made for a thread no session shows (the sub-agent gate's) has no cwd.
        cwd = record.cwd if record is not None and record.cwd else self._cwds.get(thread_id)
        if cwd and cwd in self._watched:
            if self.hub.declares(air.SESSION_INDEX):
                self.hub.client.notify(air.LIST_CHANGED, air.ListChangedParams(cwd=cwd))
            if self.listed:
                self.hub.client.notify(LIST_CHANGED, acp_sessions.ListChangedParams(cwd=cwd))

    def thread_gone(self, note: codex_threads.ThreadGone) -> None:
        """``thread/deleted`` or ``thread/archived``: its row changed (gone from the list),
        and nothing of it is kept."""
        if not self.on:
            return
        self._changed(note.threadId)
        self._states.pop(note.threadId, None)
        self._ended.pop(note.threadId, None)
        self._cwds.pop(note.threadId, None)

    def thread_closed(self, note: codex_threads.ThreadGone) -> None:
        """``thread/closed``: Codex unloaded it, so its row has no state any more."""
        if self.on and self._states.pop(note.threadId, None) is not None:
            self._changed(note.threadId)
