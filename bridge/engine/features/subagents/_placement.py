"""Where a sub-agent's traffic goes: held until its parent is known, then announced.

Part of :mod:`bridge.engine.features.subagents.subagents` (its rule 1, "hold, then announce").
Codex sends no ``thread/started`` for a child, and its first events (status, even its
turn) arrive before the parent's spawn item names it, so the engine does not know at
first that a thread is a child, or whose:

- Traffic for a thread no session shows (the hub's thread gate, :meth:`Placement.gate`)
  is held, in order, and the thread is read (``thread/read``) to learn its parent.
- A parent that is a known session makes it a child (:meth:`Placement._adopt`): its
  association (``subagent_update`` on the parent's stream, title = Codex's nickname for
  it, description = its role) is sent, and only then is its held traffic handled, as if
  it arrived now. A parent that is itself unknown is read first, so ancestors are
  announced parent before child; a parent being opened places its children once open.
- Parentage is never guessed. A spawn item naming the child is Codex's own word, enough
  to adopt it when its thread cannot be read. A thread that is no one's child here is
  another client's: dropped, and its record too once it rests (idle) or Codex forgets it
  (closed, unloaded, deleted, archived, Codex lost): read again if it works again. One whose parent cannot be read is represented on its
  root session (found from its turn's ``rootTurnId``) without being announced; what it
  asks meanwhile is declined, never left waiting.
- A sub-agent of a session already closed is forgotten too, and its work stopped.
- A child placed without Codex's nickname is read again for it: the nickname is sent as
  a patch of its association, and the tool calls naming it are retitled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ....acp import subagents as acp_subagents
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....jsonrpc.peer import ErrorObject
from ...core import exchanges, turns
from ...core.codex_asks import ReadParentage
from ...core.exchanges import Ask, Exchange, Refused
from ...core.hub import Hub
from ...core.record_parts import HeldMessage, Unplaced
from ...core.threads import ThreadRecord
from ._work import SubagentWork

log = logging.getLogger(__name__)

#: Messages held for one thread; traffic beyond them is dropped.
MAX_HELD = 10_000
#: Other clients' threads remembered as theirs (so that their traffic is not read again):
#: the oldest are dropped past it. Codex forgetting a thread drops its record sooner
#: (:meth:`Placement.thread_gone`); this bounds what a Codex that keeps every thread
#: loaded for days would make a long-lived editor hold.
MAX_OTHERS = 1_000


class Placement:
    """Holds, reads, announces and names sub-agent threads; see the module docstring.

    A held message goes back to Codex's router (:meth:`CodexLink.refeed
    <bridge.engine.core.codex_link.CodexLink.refeed>`), handled as if it arrived then; ``work`` stops
    the work of a sub-agent whose session was closed.
    """

    def __init__(self, hub: Hub, *, work: SubagentWork) -> None:
        self.hub = hub
        self._work = work
        #: Children placed without Codex's nickname whose thread is being read again for it.
        self._naming: set[str] = set()
        #: What waits for a child placed without its nickname to be named (:meth:`when_named`).
        self._retitles: dict[str, list[Callable[[], None]]] = {}
        #: The threads found to be other clients', oldest first (:data:`MAX_OTHERS`).
        self._others: dict[str, None] = {}

    # -- where a thread's traffic goes -----------------------------------------------

    def gate(self, thread_id: str, held: HeldMessage) -> bool:
        """Traffic for a thread no session shows: keep it (``True``) until the thread is
        placed, drop it when it is another client's, or let it through (``False``) when
        the thread was forgotten (its requests are then declined, never left waiting)."""
        threads = self.hub.threads
        if threads.forgotten(thread_id):
            return False
        if _unloaded(held) and self._codex_forgot(thread_id):
            return True  # nothing to place: Codex unloaded a thread that was no one's here
        record = threads.record(thread_id)
        if record.placing.other:
            if _idle(held):
                # Another client's thread at rest: nothing of it is kept meanwhile (its
                # next turn is read again, once). Codex keeps a thread loaded long after
                # its clients leave: kept until then, a long-lived editor's records would
                # grow with every thread any client ever ran.
                self._drop(thread_id)
            return True
        unplaced = _unplaced(record)
        if len(unplaced.held) >= MAX_HELD:
            log.warning(
                "thread %s: too much traffic before its parent is known; dropping", thread_id
            )
            return True
        if held.request_id is not None and unplaced.read_failed and unplaced.parent_hint is None:
            return False  # unreadable and unnamed: declined now (see _parent_unreadable)
        unplaced.held.append(held)
        self.read_parentage(thread_id)
        return True

    # -- what Codex forgets ---------------------------------------------------------------

    def thread_gone(self, note: codex_threads.ThreadGone) -> None:
        """``thread/closed`` (unloaded), ``thread/deleted``, ``thread/archived``: a thread no
        session here shows is forgotten with it (never read for it, never held)."""
        self._codex_forgot(note.threadId)

    def _codex_forgot(self, thread_id: str) -> bool:
        """Codex no longer has ``thread_id`` loaded: drop its record if it is another
        client's, or held with nothing that could still place it (no read under way, no
        spawn item naming its parent, no children waiting for it). Whether it is gone
        (dropped, or never known: ``True``) or kept. What it asked meanwhile is declined."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None:
            return True
        if record.session or record.life.opening or record.placing.waiting_children:
            return False
        unplaced = record.placing.unplaced
        if not record.placing.other and (
            unplaced is None or unplaced.reading or unplaced.parent_hint is not None
        ):
            return False  # a sub-agent of ours being placed: its read or spawn item decides
        if record.placing.unplaced is not None:
            self._decline_held_requests(record.placing.unplaced)
        self._drop(thread_id)
        return True

    def codex_lost(self) -> None:
        """Codex is gone, and every thread it had loaded with it: the records of threads no
        session here shows go too (a later Codex's traffic for them is read afresh). What
        they held is dropped, requests too (their connection is gone). Kept: what a session
        being opened waits for (it is placed once the open is answered or failed)."""
        threads = self.hub.threads
        kept: set[str] = set()
        waiting = [record for record in threads if record.life.opening]
        while waiting:
            for child_id in waiting.pop().placing.waiting_children:
                child = threads.get(child_id)
                if child_id not in kept and child is not None:
                    kept.add(child_id)
                    waiting.append(child)
        gone = [r.id for r in threads if not (r.session or r.life.opening or r.id in kept)]
        for thread_id in gone:
            self._drop(thread_id)

    def _drop(self, thread_id: str) -> None:
        self.hub.threads.drop(thread_id)
        self._others.pop(thread_id, None)
        self._retitles.pop(thread_id, None)
        self._naming.discard(thread_id)

    def read_parentage(self, thread_id: str) -> None:
        """Read ``thread_id`` (once at a time) to learn its parent, and place it."""
        record = self.hub.threads.record(thread_id)
        if record.session:
            return  # placed already: nothing to learn
        unplaced = _unplaced(record)
        if unplaced.reading:
            return
        unplaced.reading = True
        self.hub.codex.ask(
            record,
            ReadParentage(unplaced),
            "thread/read",
            codex_threads.ThreadReadParams(threadId=thread_id),
            codex_threads.ThreadReadResult,
            self._parentage_read,
            self._parentage_unread,
        )

    def _parentage_read(
        self, record: ThreadRecord, _asked: ReadParentage, result: codex_threads.ThreadReadResult
    ) -> None:
        stored = result.thread
        self._learned(
            record.id, stored.parentThreadId, stored.agentNickname, stored.agentRole, stored.cwd
        )

    def _parentage_unread(
        self, record: ThreadRecord, asked: ReadParentage, error: ErrorObject
    ) -> None:
        log.info("thread/read %s failed: %s", record.id, error.message)
        asked.unplaced.reading = False  # a spawn item naming it may ask again
        asked.unplaced.read_failed = True
        self._parent_unreadable(record.id)

    def _learned(
        self, thread_id: str, parent: str | None, nickname: str | None, role: str | None, cwd: str
    ) -> None:
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None or record.placing.unplaced is None or record.session:
            return
        parent = parent or record.placing.unplaced.parent_hint
        if parent is None:
            if record.life.opening:
                return  # a root the client is opening: what it sent waits for the open
            # Not a sub-agent: another client's thread, or one of ours still being
            # created (its thread/start answer registers it; nothing held matters).
            self._ignore(thread_id)
            return
        parent_record = threads.get(parent)
        if parent_record is not None and parent_record.session:
            self._adopt(thread_id, parent, nickname, role, cwd)
        elif parent_record is not None and parent_record.life.opening:
            # Its parent is being loaded (or resumed, forked): placed once it opens.
            parent_record.placing.waiting_children.append(thread_id)
            record.placing.unplaced.reading = True
            record.nickname, record.role, record.cwd = nickname, role, cwd
        elif parent_record is not None and parent_record.placing.other:
            self._ignore(thread_id)
        elif threads.forgotten(parent):
            self._forget_late(thread_id)
        else:
            # A nested child whose parent is not known yet: learn the parent first,
            # so ancestors are announced parent before child.
            threads.record(parent).placing.waiting_children.append(thread_id)
            record.placing.unplaced.reading = (
                True  # keep its held traffic until the parent resolves
            )
            record.nickname, record.role, record.cwd = nickname, role, cwd
            self.read_parentage(parent)

    def _parent_unreadable(self, thread_id: str) -> None:
        """``thread_id``'s parentage cannot be read: use what else is known, guess nothing."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None or record.placing.unplaced is None or record.session:
            return
        hint = record.placing.unplaced.parent_hint
        if hint is not None and threads.session(hint) is not None:
            self._adopt(thread_id, hint, None, None, "")
            return
        root = self._root_for_turn(record.placing.unplaced)
        if root is not None:
            # Parentage unknown: never announced, represented on its root session.
            self._adopt(thread_id, root, None, None, "", announce=False)
        # Children waiting for this one to be placed cannot be announced under it
        # (their chain is broken): each is represented on its root, if it has one.
        waiting, record.placing.waiting_children = record.placing.waiting_children, []
        for child_id in waiting:
            child = threads.get(child_id)
            if child is not None:
                child.nickname, child.role, child.cwd = None, None, ""
                if child.placing.unplaced is not None:
                    # Free to be read again: a later word on its chain may place it.
                    child.placing.unplaced.reading = False
            self._parent_unreadable(child_id)
        if record.placing.unplaced is not None and not record.session:
            # Its notifications stay held: a spawn item may still name its parent. Its
            # requests cannot wait for that (Codex would wait with them, maybe forever):
            # with no session to ask on, they are declined now.
            self._decline_held_requests(record.placing.unplaced)

    def _decline_held_requests(self, unplaced: Unplaced) -> None:
        requests = [h for h in unplaced.held if h.request_id is not None]
        unplaced.held = [h for h in unplaced.held if h.request_id is None]
        for held in requests:
            self.hub.codex.refeed(held)  # no session shows the thread: answered "decline"

    def _root_for_turn(self, unplaced: Unplaced) -> str | None:
        root_turn = unplaced.root_turn_hint
        for held in unplaced.held:
            if held.method == "turn/started" and isinstance(
                held.params, codex_types.TurnNotification
            ):
                root_turn = held.params.turn.rootTurnId or root_turn
        if root_turn is None:
            return None
        for record in self.hub.threads.sessions():
            turn = record.turn
            if record.parent_id is None and turn is not None and turn.id == root_turn:
                return record.id
        return None

    def _ignore(self, thread_id: str) -> None:
        record = self.hub.threads.record(thread_id)
        unplaced, record.placing.unplaced = record.placing.unplaced, None
        record.placing.other = True
        self._others[thread_id] = None
        while len(self._others) > MAX_OTHERS:
            oldest = next(iter(self._others))
            del self._others[oldest]
            kept = self.hub.threads.get(oldest)
            if (
                kept is not None
                and kept.placing.other
                and not kept.session
                and not kept.life.opening
            ):
                self._drop(oldest)  # its traffic, if any comes, is read again
        self._retitles.pop(thread_id, None)
        waiting, record.placing.waiting_children = record.placing.waiting_children, []
        for child_id in waiting:
            self._ignore(child_id)
        if unplaced is not None and unplaced.held:
            # Not ours: another client on the same app-server owns this thread and
            # answers its questions. Answering them here would pre-empt that client.
            log.info(
                "thread %s belongs to no session here; dropping %d held message(s)",
                thread_id,
                len(unplaced.held),
            )
        if unplaced is None or not _working(unplaced.held):
            # Kept only while it works, so that its traffic is dropped without another
            # read. At rest (it went idle while it was read: a short turn), or with no
            # status held (read only to place a sub-agent under it, its own statuses
            # came before), no idle status is coming to drop it (see gate).
            self._drop(thread_id)

    def _forget_late(self, thread_id: str) -> None:
        """A sub-agent of a thread already forgotten (closed): forgotten too. What it
        asked meanwhile is declined, never asked on a session that is gone; unless it
        works for another client's turn (another window): then it is that client's."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        held = (
            record.placing.unplaced.held if record is not None and record.placing.unplaced else []
        )
        if not self._work.closed_sessions_work(_root_turn_of(held)):
            self._ignore(thread_id)
            return
        gone = threads.forget(thread_id, subagent=True)
        waiting: list[str] = []
        for record in gone:
            waiting += record.placing.waiting_children
            held = record.placing.unplaced.held if record.placing.unplaced is not None else []
            running = _running_turn(held)
            if running is not None:
                # Work for a session that was closed: stop it (Codex does not cascade).
                turns.unwanted(record, running)
                self._work.interrupt(record)
            for message in held:
                self.hub.codex.refeed(message)
        for child_id in waiting:
            self._forget_late(child_id)

    def _adopt(
        self,
        thread_id: str,
        parent_id: str,
        nickname: str | None,
        role: str | None,
        cwd: str,
        *,
        announce: bool = True,
    ) -> None:
        threads = self.hub.threads
        parent = threads.session(parent_id)
        assert parent is not None
        visible = announce and self.hub.subagents_exposed and parent.visible
        if visible:
            self.hub.client.update(parent_id, acp_subagents.announcement(thread_id, nickname, role))
        record = threads.add_child(
            thread_id, parent, nickname=nickname, role=role, cwd=cwd, visible=visible
        )
        # Placed from its live traffic: until Codex shows it at work, its idle is a
        # thread about to start, not work that ended (workstate.reportable).
        record.placing.unstarted = True
        self.session_added(record)  # releases the held traffic
        deferred, record.placing.after_announce = record.placing.after_announce, []
        for send in deferred:
            send()
        if nickname is None and announce:
            # Placed on the spawn item's word alone (its first read failed): Codex's
            # nickname for it comes with a later read, and titles it then.
            self.read_name(thread_id)
        else:
            self._retitles.pop(thread_id, None)
        waiting, record.placing.waiting_children = record.placing.waiting_children, []
        for child_id in waiting:
            child = threads.record(child_id)
            self._adopt(child_id, thread_id, child.nickname, child.role, child.cwd)

    def read_name(self, thread_id: str) -> None:
        """Read a child placed without its nickname again; a nickname (or role) found is
        sent as a patch of its association (the RFD's ``subagent_update`` without state: the
        title v2 clients show), and retitles the tool calls naming it."""
        if thread_id in self._naming:
            return
        self._naming.add(thread_id)
        exchanges.start(self.hub, self._named(thread_id))

    def _named(self, thread_id: str) -> Exchange:
        params = codex_threads.ThreadReadParams(threadId=thread_id)
        try:
            read = yield Ask("thread/read", params, codex_threads.ThreadReadResult)
        except Refused as refused:
            self._naming.discard(thread_id)
            log.info("thread/read %s for its nickname failed: %s", thread_id, refused)
            return
        self._naming.discard(thread_id)
        stored = read.thread
        record = self.hub.threads.session(thread_id)
        if record is None or not record.is_child or record.nickname is not None:
            return
        if not stored.agentNickname and not stored.agentRole:
            return  # still nameless: a later collab item naming it reads it again
        record.nickname = stored.agentNickname or None
        record.role = record.role or stored.agentRole
        record.cwd = record.cwd or stored.cwd
        if record.visible and record.parent_id is not None:
            update = acp_subagents.announcement(thread_id, record.nickname, stored.agentRole)
            self.hub.client.update(record.parent_id, update)
        for retitle in self._retitles.pop(thread_id, []):
            retitle()

    def open_failed(self, thread_id: str) -> None:
        """A load, resume or fork of ``thread_id`` failed: what waited for it is no
        session's. Its requests, and its waiting children's, are declined; the rest is
        dropped. A closed session asked for again in vain stays closed, and so do the
        sub-agents that waited for it: forgotten, never another client's (:meth:`_forget_late`)."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None or record.session:
            return
        if threads.forgotten(thread_id):
            self._forget_late(thread_id)
            return
        for held in [record, *map(threads.record, record.placing.waiting_children)]:
            if held.placing.unplaced is not None:
                self._decline_held_requests(held.placing.unplaced)
        self._ignore(thread_id)

    def session_added(self, record: ThreadRecord) -> None:
        """A thread became a session (opened by the client, or placed as a sub-agent):
        what was held for it is handled now, and children waiting for it are placed."""
        threads = self.hub.threads
        record.placing.other = False
        unplaced, record.placing.unplaced = record.placing.unplaced, None
        for held in unplaced.held if unplaced is not None else []:
            self.hub.codex.refeed(held)
        waiting, record.placing.waiting_children = record.placing.waiting_children, []
        for child_id in waiting:
            child = threads.get(child_id)
            if child is not None and child.placing.unplaced is not None:
                self._adopt(child_id, record.id, child.nickname, child.role, child.cwd)

    def hint_parent(self, thread_id: str, parent_id: str) -> None:
        """A spawn item names ``thread_id``'s parent: Codex's own word, enough to adopt it."""
        record = self.hub.threads.record(thread_id)
        record.placing.other = False
        unplaced = _unplaced(record)
        unplaced.parent_hint = parent_id
        if unplaced.read_failed:
            # Its thread could not be read: the spawn item alone establishes it.
            self._adopt(thread_id, parent_id, None, None, "")

    # -- what waits for a child to be placed, or named ---------------------------------------

    def being_placed(self, thread_ids: list[str]) -> list[ThreadRecord]:
        """The threads of ``thread_ids`` still being placed. One not seen at all yet counts:
        a busy Codex can finish a collab call before the child's own first traffic, which
        will place it (see :meth:`gate`)."""
        threads = self.hub.threads
        placing = []
        for thread_id in thread_ids:
            record = threads.get(thread_id)
            if record is None and not threads.forgotten(thread_id):
                record = threads.record(thread_id)
                _unplaced(record)
            if record is not None and not record.session and record.placing.unplaced is not None:
                placing.append(record)
        return placing

    def when_named(self, record: ThreadRecord, then: Callable[[], None]) -> None:
        """Run ``then`` once ``record`` (being placed) is announced, and again once it is
        named if it is placed without Codex's nickname (its read failed)."""
        record.placing.after_announce.append(then)
        self._retitles.setdefault(record.id, []).append(then)


def _running_turn(held: list[HeldMessage]) -> str | None:
    """The turn held traffic says is running (started, not completed), if any."""
    running: str | None = None
    for message in held:
        if isinstance(message.params, codex_types.TurnNotification):
            if message.method == "turn/started":
                running = message.params.turn.id
            elif message.method == "turn/completed" and running == message.params.turn.id:
                running = None
    return running


def _root_turn_of(held: list[HeldMessage]) -> str | None:
    """The root turn held traffic says the thread works for (its ``turn/started``)."""
    for message in held:
        if message.method == "turn/started" and isinstance(
            message.params, codex_types.TurnNotification
        ):
            return message.params.turn.rootTurnId
    return None


def _unloaded(held: HeldMessage) -> bool:
    """Whether ``held`` is Codex's word that the thread is not loaded any more."""
    if held.method != "thread/status/changed" or held.request_id is not None:
        return False
    params = held.params
    return isinstance(params, codex_types.ThreadStatusChanged) and (
        params.status.type == "notLoaded"
    )


def _idle(held: HeldMessage) -> bool:
    """Whether ``held`` is Codex's word that the thread is at rest (no turn runs)."""
    params = held.params
    return isinstance(params, codex_types.ThreadStatusChanged) and params.status.type == "idle"


def _working(held: list[HeldMessage]) -> bool:
    """Whether the last status held says a turn runs on the thread."""
    for message in reversed(held):
        if isinstance(message.params, codex_types.ThreadStatusChanged):
            return message.params.status.type == "active"
    return False


def _unplaced(record: ThreadRecord) -> Unplaced:
    if record.placing.unplaced is None:
        record.placing.unplaced = Unplaced()
    return record.placing.unplaced
