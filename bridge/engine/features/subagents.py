"""Codex sub-agents as ACP subagent sessions (the Subagent Sessions RFD).

A Codex sub-agent is a thread of its own; its session id is its thread id.
Codex sends no ``thread/started`` for a child and its first events (status,
even its turn) arrive before the parent's spawn item names it, so the engine
does not know at first that a thread is a child, or whose. The rules here:

1. **Hold, then announce.** Traffic for a thread no session shows (the hub's
   thread gate) is held, in order, and the thread is read (``thread/read``) to
   learn its parent. A parent that is a known session makes it a child: its
   association (``subagent_update`` on the parent's stream, title = Codex's
   nickname for it, description = its role) is sent, and only then is its held
   traffic handled, as if it arrived now. A parent that is itself unknown is
   read first, so ancestors are announced parent before child. Parentage is
   never guessed: a thread that is no one's child here is dropped, and one
   whose parent cannot be read is represented on its root session (found from
   its turn's ``rootTurnId``) without being announced.
2. **Messages, not tool calls.** A spawn or ``send_input`` is a
   ``session_message`` in the sender's transcript (outgoing view); the child's
   own user message is the incoming view in its transcript; a result the
   parent receives (``wait``) is an incoming message in the parent's. ``wait``,
   ``close_agent`` and ``resume_agent`` stay tool calls of the session that made
   them.
3. **Work state on the parent.** ``thread/status/changed`` and the child's turns
   become ``running`` / ``requires_action`` / ``idle`` (with the turn's stop
   reason) / ``unknown`` (Codex lost), each sent once. Codex creates a child
   ``idle`` before its first turn starts: that is no work that ended, so a new
   child's first state is ``running`` (``workstate.reportable``).
   ``capabilities.cancel`` is advertised exactly while the child has a turn the
   bridge can interrupt.
4. **Cancel.** ``session/cancel`` on a child interrupts that child's turn (and
   its active descendants'); on a parent it also reaches every active
   descendant, because Codex does not cascade. Idle + cancelled is reported
   when Codex says the turn was interrupted, not when it acknowledges.
5. **Restricted.** A client request other than ``session/cancel`` on a child's
   session id is refused.
6. **Without the capability** (a v1 client that did not declare ``subagents``),
   nothing here is ever announced or sent as a session message: children are
   hidden sessions, spawns and messages are ordinary tool calls on the parent,
   and a child's questions are asked on its root session, naming the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET

from ...acp import subagents as acp_subagents
from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...codex import items as codex_items
from ...codex import threads as codex_threads
from ...codex import types as codex_types
from ...codex.messages import ItemNotification
from ...jsonrpc import ErrorCode, RpcError
from ...jsonrpc.peer import ErrorObject
from ..core import workstate
from ..core.hub import Hub
from ..core.threads import Held, Status, ThreadRecord, Turn, Unplaced
from ..views.history import Nicknames

log = logging.getLogger(__name__)

#: Client methods that change a session: refused on a child's id (RFD: an allowlist of ``cancel``).
RESTRICTED = frozenset(
    {
        "session/prompt",
        "session/set_mode",
        "session/set_config_option",
        "session/load",
        "session/resume",
        "session/close",
        "session/fork",
        "_session/steering",
        # ACP v2's
        "session/set_title",
        "session/archive",
        "session/unarchive",
        "session/delete",
    }
)
#: Messages held for one thread before the oldest notifications are dropped.
MAX_HELD = 10_000


class Subagents:
    """Places sub-agent threads, shows their messages and work state, cancels their work.

    ``refeed`` handles a held message as if it arrived now; ``cancel_questions``
    answers ``cancel`` to what a thread asked (a cancel's cascade).
    """

    def __init__(
        self,
        hub: Hub,
        *,
        refeed: Callable[[Held], None],
        cancel_questions: Callable[[str], None],
        interrupt_refused: Callable[[], None] = lambda: None,
    ) -> None:
        self.hub = hub
        self._refeed = refeed
        self._cancel_questions = cancel_questions
        self._interrupt_refused = interrupt_refused
        #: Children placed without Codex's nickname whose thread is being read again for it.
        self._naming: set[str] = set()
        #: Retitles of tool calls naming a child not yet named (:meth:`_retitle_when_placed`).
        self._retitles: dict[str, list[Callable[[], None]]] = {}

    # -- where a thread's traffic goes -----------------------------------------------

    def gate(self, thread_id: str, held: Held) -> bool:
        """Traffic for a thread no session shows: keep it (``True``) until the thread is
        placed, drop it when it is another client's, or let it through (``False``) when
        the thread was forgotten (its requests are then declined, never left waiting)."""
        threads = self.hub.threads
        if threads.forgotten(thread_id):
            return False
        record = threads.record(thread_id)
        if record.other:
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
        self._read(thread_id)
        return True

    def _read_thread(
        self,
        thread_id: str,
        read: Callable[[codex_threads.ThreadReadResult], None],
        failed: Callable[[ErrorObject], None],
    ) -> None:
        """Ask Codex for the thread (its parentage, nickname and role; no turns)."""
        self.hub.codex_request(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=thread_id),
            codex_threads.ThreadReadResult,
            read,
            failed,
        )

    def _read(self, thread_id: str) -> None:
        record = self.hub.threads.record(thread_id)
        if record.session:
            return  # placed already: nothing to learn
        unplaced = _unplaced(record)
        if unplaced.reading:
            return
        unplaced.reading = True

        def read(result: codex_threads.ThreadReadResult) -> None:
            stored = result.thread
            self._learned(
                thread_id, stored.parentThreadId, stored.agentNickname, stored.agentRole, stored.cwd
            )

        def failed(error: ErrorObject) -> None:
            log.info("thread/read %s failed: %s", thread_id, error.message)
            unplaced.reading = False  # a spawn item naming it may ask again
            unplaced.read_failed = True
            self._parent_unreadable(thread_id)

        self._read_thread(thread_id, read, failed)

    def _learned(
        self, thread_id: str, parent: str | None, nickname: str | None, role: str | None, cwd: str
    ) -> None:
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None or record.unplaced is None or record.session:
            return
        parent = parent or record.unplaced.parent_hint
        if parent is None:
            if record.opening:
                return  # a root the client is opening: what it sent waits for the open
            # Not a sub-agent: another client's thread, or one of ours still being
            # created (its thread/start answer registers it; nothing held matters).
            self._ignore(thread_id)
            return
        parent_record = threads.get(parent)
        if parent_record is not None and parent_record.session:
            self._adopt(thread_id, parent, nickname, role, cwd)
        elif parent_record is not None and parent_record.opening:
            # Its parent is being loaded (or resumed, forked): placed once it opens.
            parent_record.waiting_children.append(thread_id)
            record.unplaced.reading = True
            record.nickname, record.role, record.cwd = nickname, role, cwd
        elif parent_record is not None and parent_record.other:
            self._ignore(thread_id)
        elif threads.forgotten(parent):
            self._forget_late(thread_id)
        else:
            # A nested child whose parent is not known yet: learn the parent first,
            # so ancestors are announced parent before child.
            threads.record(parent).waiting_children.append(thread_id)
            record.unplaced.reading = True  # keep its held traffic until the parent resolves
            record.nickname, record.role, record.cwd = nickname, role, cwd
            self._read(parent)

    def _parent_unreadable(self, thread_id: str) -> None:
        """``thread_id``'s parentage cannot be read: use what else is known, guess nothing."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        if record is None or record.unplaced is None or record.session:
            return
        hint = record.unplaced.parent_hint
        if hint is not None and threads.session(hint) is not None:
            self._adopt(thread_id, hint, None, None, "")
            return
        root = self._root_for_turn(record.unplaced)
        if root is not None:
            # Parentage unknown: never announced, represented on its root session.
            self._adopt(thread_id, root, None, None, "", announce=False)
        # Children waiting for this one to be placed cannot be announced under it
        # (their chain is broken): each is represented on its root, if it has one.
        waiting, record.waiting_children = record.waiting_children, []
        for child_id in waiting:
            child = threads.get(child_id)
            if child is not None:
                child.nickname, child.role, child.cwd = None, None, ""
                if child.unplaced is not None:
                    # Free to be read again: a later word on its chain may place it.
                    child.unplaced.reading = False
            self._parent_unreadable(child_id)
        if record.unplaced is not None and not record.session:
            # Its notifications stay held: a spawn item may still name its parent. Its
            # requests cannot wait for that (Codex would wait with them, maybe forever):
            # with no session to ask on, they are declined now.
            self._decline_held_requests(record.unplaced)

    def _decline_held_requests(self, unplaced: Unplaced) -> None:
        requests = [h for h in unplaced.held if h.request_id is not None]
        unplaced.held = [h for h in unplaced.held if h.request_id is None]
        for held in requests:
            self._refeed(held)  # no session shows the thread: answered "decline"

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
        unplaced, record.unplaced = record.unplaced, None
        record.other = True
        self._retitles.pop(thread_id, None)
        waiting, record.waiting_children = record.waiting_children, []
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

    def _closed_sessions_work(self, root_turn: str | None) -> bool:
        """Whether a sub-agent's turn working for ``root_turn`` is work of a session this
        connection closed: a turn it started there (or one it cannot tell). Another
        client's turn on a shared thread (another window) goes on without this one."""
        return root_turn is None or root_turn in self.hub.threads.forgotten_turns

    def _forget_late(self, thread_id: str) -> None:
        """A sub-agent of a thread already forgotten (closed): forgotten too. What it
        asked meanwhile is declined, never asked on a session that is gone; unless it
        works for another client's turn (another window): then it is that client's."""
        threads = self.hub.threads
        record = threads.get(thread_id)
        held = record.unplaced.held if record is not None and record.unplaced else []
        if not self._closed_sessions_work(_root_turn_of(held)):
            self._ignore(thread_id)
            return
        gone = threads.forget(thread_id, subagent=True)
        waiting: list[str] = []
        for record in gone:
            waiting += record.waiting_children
            held = record.unplaced.held if record.unplaced is not None else []
            running = _running_turn(held)
            if running is not None:
                # Work for a session that was closed: stop it (Codex does not cascade).
                record.turn = Turn(id=running, cancel_requested=True)
                self._interrupt(record)
            for message in held:
                self._refeed(message)
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
            self.hub.update(parent_id, acp_subagents.announcement(thread_id, nickname, role))
        record = threads.add_child(
            thread_id, parent, nickname=nickname, role=role, cwd=cwd, visible=visible
        )
        # Placed from its live traffic: until Codex shows it at work, its idle is a
        # thread about to start, not work that ended (workstate.reportable).
        record.unstarted = True
        self.session_added(record)  # releases the held traffic
        deferred, record.after_announce = record.after_announce, []
        for send in deferred:
            send()
        if nickname is None and announce:
            # Placed on the spawn item's word alone (its first read failed): Codex's
            # nickname for it comes with a later read, and titles it then.
            self._read_name(thread_id)
        else:
            self._retitles.pop(thread_id, None)
        waiting, record.waiting_children = record.waiting_children, []
        for child_id in waiting:
            child = threads.record(child_id)
            self._adopt(child_id, thread_id, child.nickname, child.role, child.cwd)

    def _read_name(self, thread_id: str) -> None:
        """Read a child placed without its nickname again; a nickname (or role) found is
        sent as a patch of its association (the RFD's ``subagent_update`` without state: the
        title v2 clients show), and retitles the tool calls naming it."""
        if thread_id in self._naming:
            return
        self._naming.add(thread_id)

        def read(result: codex_threads.ThreadReadResult) -> None:
            self._naming.discard(thread_id)
            stored = result.thread
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
                self.hub.update(record.parent_id, update)
            for retitle in self._retitles.pop(thread_id, []):
                retitle()

        def failed(error: ErrorObject) -> None:
            self._naming.discard(thread_id)
            log.info("thread/read %s for its nickname failed: %s", thread_id, error.message)

        self._read_thread(thread_id, read, failed)

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
        for held in [record, *map(threads.record, record.waiting_children)]:
            if held.unplaced is not None:
                self._decline_held_requests(held.unplaced)
        self._ignore(thread_id)

    def session_added(self, record: ThreadRecord) -> None:
        """A thread became a session (opened by the client, or placed as a sub-agent):
        what was held for it is handled now, and children waiting for it are placed."""
        threads = self.hub.threads
        record.other = False
        unplaced, record.unplaced = record.unplaced, None
        for held in unplaced.held if unplaced is not None else []:
            self._refeed(held)
        waiting, record.waiting_children = record.waiting_children, []
        for child_id in waiting:
            child = threads.get(child_id)
            if child is not None and child.unplaced is not None:
                self._adopt(child_id, record.id, child.nickname, child.role, child.cwd)

    def guard(self, method: str, session_id: str) -> None:
        """Refuse a client request that would change a sub-agent's session."""
        record = self.hub.threads.session(session_id)
        if record is not None and record.is_child and method in RESTRICTED:
            name = f" ({record.nickname})" if record.nickname else ""
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"{method}: session {session_id}{name} is a subagent session of "
                f"{record.parent_id}; clients can only cancel it (session/cancel)",
                {"sessionId": session_id, "parentSessionId": record.parent_id},
            )

    # -- spawn, send_input, wait, close: messages and tool calls -----------------------------

    def item_started(self, note: ItemNotification) -> None:
        item = note.item
        if not isinstance(item, codex_items.CollabAgentToolCallItem):
            return
        record = self.hub.threads.session(note.threadId)
        if record is not None and self._as_tool_call(item):
            record.open_collab[item.id] = item
            self.hub.update(note.threadId, self._tool_call(item, "in_progress"))

    def item_completed(self, note: ItemNotification) -> None:
        item = note.item
        if not isinstance(item, codex_items.CollabAgentToolCallItem):
            if isinstance(item, codex_types.UserMessageItem):
                self._incoming_user_message(note.threadId, item)
            return
        thread_id = note.threadId
        record = self.hub.threads.session(thread_id)
        if record is None:
            return
        record.open_collab.pop(item.id, None)
        exposing = self.hub.subagents_exposed
        if item.tool in ("spawnAgent", "sendInput") and exposing:
            for receiver in item.receiverThreadIds:
                self._message_to(thread_id, receiver, item)
        if self._as_tool_call(item) and item.id not in record.ended_tools:
            self.hub.update(thread_id, self._finished(item))
            self._retitle_when_placed(thread_id, item)
        for receiver in item.receiverThreadIds:
            child = self.hub.threads.session(receiver)
            if child is not None and child.is_child and child.nickname is None:
                self._read_name(receiver)  # Codex names its sub-agents by now
        if item.tool == "wait" and exposing:
            for receiver, state in item.agentsStates.items():
                message = state.get("message") if isinstance(state, dict) else None
                if not message:
                    continue
                send = self._incoming_result(thread_id, receiver, f"{item.id}/{receiver}", message)
                known = self.hub.threads.get(receiver)
                if known is not None and known.is_child:
                    send()
                elif known is not None and known.unplaced is not None:
                    # Its announcement is still on its way: the message names it, so after.
                    known.after_announce.append(send)

    def _message_to(
        self, sender: str, receiver: str, item: codex_items.CollabAgentToolCallItem
    ) -> None:
        prompt = item.prompt or ""
        threads = self.hub.threads
        child = threads.get(receiver)
        if child is not None and child.is_child:
            if child.visible:
                self.hub.update(sender, text_message(item.id, sender, receiver, prompt))
            return

        def send() -> None:
            placed = threads.session(receiver)
            if placed is not None and placed.is_child and placed.visible:
                self.hub.update(sender, text_message(item.id, sender, receiver, prompt))

        # Not announced yet (its traffic is held): send the message right after the
        # announcement, which it needs (it names the child). Queued before the spawn's
        # word on its parent, which may place it at once (its read failed): placing it
        # sends what is queued.
        record = threads.record(receiver)
        record.after_announce.append(send)
        if item.tool == "spawnAgent":
            self._hint_parent(receiver, sender)
        if not record.session:
            self._read(receiver)

    def _hint_parent(self, thread_id: str, parent_id: str) -> None:
        """A spawn item names ``thread_id``'s parent: Codex's own word, enough to adopt it."""
        record = self.hub.threads.record(thread_id)
        record.other = False
        unplaced = _unplaced(record)
        unplaced.parent_hint = parent_id
        if unplaced.read_failed:
            # Its thread could not be read: the spawn item alone establishes it.
            self._adopt(thread_id, parent_id, None, None, "")

    def _incoming_result(
        self, recipient: str, sender: str, message_id: str, text: str
    ) -> Callable[[], None]:
        def send() -> None:
            child = self.hub.threads.session(sender)
            if child is not None and child.is_child and child.visible:
                self.hub.update(recipient, text_message(message_id, sender, recipient, text))

        return send

    def _incoming_user_message(self, thread_id: str, message: codex_types.UserMessageItem) -> None:
        child = self.hub.threads.session(thread_id)
        if child is None or not child.is_child or not child.visible or child.parent_id is None:
            return
        texts = [part.get("text", "") for part in message.content if part.get("type") == "text"]
        # A child's user message comes from its parent (spawn or send_input): the
        # incoming view of that message, in the child's own transcript.
        self.hub.update(
            child.id, text_message(message.id, child.parent_id, child.id, "\n".join(texts))
        )

    def _tool_call(
        self,
        item: codex_items.CollabAgentToolCallItem,
        status: acp_tools.ToolCallStatus,
        content: list[Any] | msgspec.UnsetType = UNSET,
        raw_output: Any = UNSET,
        nicknames: Nicknames | None = None,
    ) -> acp_tools.ToolCall:
        raw_input = {"tool": item.tool, "targets": item.receiverThreadIds, "prompt": item.prompt}
        return acp_tools.ToolCall(
            toolCallId=item.id,
            title=self._tool_title(item, nicknames),
            kind="other",
            status=status,
            content=content,
            rawInput=raw_input,
            rawOutput=raw_output,
        )

    def _finished(self, item: codex_items.CollabAgentToolCallItem) -> acp_tools.ToolCallUpdate:
        """The update that ends a live collab tool call: what a replay of the item shows."""
        return acp_tools.ToolCallUpdate(
            toolCallId=item.id,
            title=self._tool_title(item),
            status=_final_status(item),
            content=self._states_content(item),
            rawOutput={"agentsStates": item.agentsStates},
        )

    def _retitle_when_placed(
        self, session_id: str, item: codex_items.CollabAgentToolCallItem
    ) -> None:
        """A finished tool call that names a sub-agent still being placed (its nickname not
        known yet) is retitled once it is: the same title a replay of the item gives it."""
        threads = self.hub.threads
        placing = []
        for receiver in item.receiverThreadIds:
            record = threads.get(receiver)
            if record is None and not threads.forgotten(receiver):
                # Not seen at all yet: a busy Codex can finish the call before the child's
                # own first traffic, which will place it (see gate); wait for that too.
                record = threads.record(receiver)
                _unplaced(record)
            if record is not None and not record.session and record.unplaced is not None:
                placing.append(record)
        if not placing:
            return
        shown = [self._tool_title(item)]

        def retitle() -> None:
            title = self._tool_title(item)
            if title != shown[0]:
                shown[0] = title
                update = acp_tools.ToolCallUpdate(
                    toolCallId=item.id, title=title, content=self._states_content(item)
                )
                self.hub.update(session_id, update)

        for record in placing:
            record.after_announce.append(retitle)
            # Placed without a name (its read failed), it is retitled once named.
            self._retitles.setdefault(record.id, []).append(retitle)

    def _as_tool_call(self, item: codex_items.CollabAgentToolCallItem) -> bool:
        """wait / close / resume are tool calls; spawn and send_input only without the capability."""
        return item.tool not in ("spawnAgent", "sendInput") or not self.hub.subagents_exposed

    def _name(self, thread_id: str, nicknames: Nicknames | None = None) -> str:
        """What a collab tool call calls a sub-agent: Codex's nickname for it (``nicknames``,
        the threads a replay read, else the registry's), or "sub-agent"."""
        nickname = nicknames.get(thread_id) if nicknames is not None else None
        if nickname is None:
            child = self.hub.threads.session(thread_id)
            nickname = child.nickname if child is not None and child.is_child else None
        return nickname or "sub-agent"

    def _tool_title(
        self, item: codex_items.CollabAgentToolCallItem, nicknames: Nicknames | None = None
    ) -> str:
        names = ", ".join(self._name(t, nicknames) for t in item.receiverThreadIds) or "sub-agent"
        return {
            "spawnAgent": f"Spawn {names}",
            "sendInput": f"Message {names}",
            "wait": f"Wait for {names}",
            "closeAgent": f"Close {names}",
            "resumeAgent": f"Resume {names}",
        }.get(item.tool, f"{item.tool} {names}")

    def _states_content(
        self, item: codex_items.CollabAgentToolCallItem, nicknames: Nicknames | None = None
    ) -> list[Any] | msgspec.UnsetType:
        lines = []
        if item.prompt and item.tool in ("spawnAgent", "sendInput"):
            lines.append(item.prompt)
        for thread_id, state in item.agentsStates.items():
            if isinstance(state, dict):
                status = state.get("status", "")
                message = state.get("message")
                lines.append(
                    f"{self._name(thread_id, nicknames)}: {status}"
                    + (f"\n{message}" if message else "")
                )
        if not lines:
            return UNSET
        return [acp_tools.Content(content=acp_types.TextContent(text="\n\n".join(lines)))]

    def history_item(
        self, session_id: str, nicknames: Nicknames | None = None
    ) -> Callable[[Any], list[msgspec.Struct] | None]:
        """How a load replays the collab items of ``session_id``'s history. ``nicknames``:
        Codex's nicknames of the sub-agents the load read, which title the tool calls that
        name them as the live ones were titled (:meth:`_finished`)."""

        def replay(item: Any) -> list[msgspec.Struct] | None:
            if not isinstance(item, codex_items.CollabAgentToolCallItem):
                return None
            exposing = self.hub.subagents_exposed
            out: list[msgspec.Struct] = []
            if self._as_tool_call(item):
                out.append(
                    self._tool_call(
                        item,
                        _final_status(item),
                        self._states_content(item, nicknames),
                        raw_output={"agentsStates": item.agentsStates},
                        nicknames=nicknames,
                    )
                )
            elif item.prompt is not None:
                # A historical address is no announcement (RFD): the recipient may be
                # announced later in this replay, or never.
                several = len(item.receiverThreadIds) > 1
                out += [
                    text_message(
                        f"{item.id}/{receiver}" if several else item.id,
                        session_id,
                        receiver,
                        item.prompt,
                    )
                    for receiver in item.receiverThreadIds
                ]
            if item.tool == "wait" and exposing:
                for receiver, state in item.agentsStates.items():
                    message = state.get("message") if isinstance(state, dict) else None
                    if message:
                        out.append(
                            text_message(f"{item.id}/{receiver}", receiver, session_id, message)
                        )
            return out

        return replay

    # -- work state ------------------------------------------------------------------------------

    def status_changed(self, note: codex_types.ThreadStatusChanged) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or not record.is_child:
            return
        kind = note.status.type
        if kind == "idle" and record.turn is not None:
            # Codex says idle just before the turn ends; the turn's end says how it ended.
            return
        if kind not in ("active", "idle", "systemError"):
            return
        record.status = Status(kind, frozenset(note.status.activeFlags))
        if kind == "active":
            record.unstarted = False
        self.report(record)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if (
            record is None
            and self.hub.threads.forgotten_subagent(note.threadId)
            and self._closed_sessions_work(note.turn.rootTurnId)
        ):
            # Work a sub-agent of a closed session starts: no one wants it (RFD: closing
            # a parent cancels its descendants' work, and Codex does not cascade).
            self._interrupt(ThreadRecord(note.threadId, turn=Turn(id=note.turn.id)))
            return
        if record is None or not record.is_child:
            return
        previous = record.turn
        if previous is not None and previous.id == note.turn.id:
            turn = previous
        else:
            # A turn whose end was never seen: a cancel that reached it still stands.
            turn = Turn(
                id=note.turn.id, cancel_requested=previous is not None and previous.cancel_requested
            )
        turn.root_turn_id = note.turn.rootTurnId
        record.turn = turn
        record.unstarted = False
        self.report(record)
        if self.hub.threads.work_cancelled(record):
            # A turn of work the client cancelled (Codex does not cascade): stop it now.
            turn.cancel_requested = True
            self._interrupt(record)

    def turn_ending(self, note: codex_types.TurnNotification) -> None:
        """A turn that ended interrupted or failed ends its collab tool calls still open
        (a ``wait`` Codex never completes), before the prompt's answer, as
        :meth:`bridge.engine.features.tools.Tools.turn_completed` does for tool items."""
        record = self.hub.threads.session(note.threadId)
        status = note.turn.status
        if record is None or status not in ("interrupted", "failed") or not record.open_collab:
            return
        for item in record.open_collab.values():
            cause = "was cancelled" if status == "interrupted" else "failed"
            note_text = acp_tools.Content(
                content=acp_types.TextContent(text=f"The turn {cause} before this finished.")
            )
            self.hub.update(
                record.id,
                acp_tools.ToolCallUpdate(toolCallId=item.id, status="failed", content=[note_text]),
            )
        record.ended_tools |= set(record.open_collab)
        record.open_collab.clear()

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        record = self.hub.threads.session(note.threadId)
        if record is None or not record.is_child:
            return
        if record.turn is not None and record.turn.id == note.turn.id:
            record.turn = None
        error = note.turn.error.message if note.turn.error else None
        workstate.turn_ended(record, note.turn.status, error)
        self.report(record)

    def report(self, record: ThreadRecord) -> None:
        """Send the child's work state (and cancel capability) on its parent's stream, if changed.

        A child with no state to report yet (:func:`workstate.reportable`) keeps what
        was last sent, if anything."""
        state = workstate.reportable(record)
        can_cancel = workstate.cancellable(record)
        state_changed = state is not None and record.reported != state
        caps_changed = record.reported_cancel != can_cancel
        if state is not None:
            record.reported = state
        record.reported_cancel = can_cancel
        if not record.visible or record.parent_id is None or not (state_changed or caps_changed):
            return
        self.hub.update(
            record.parent_id,
            acp_subagents.SubagentUpdate(
                sessionId=record.id,
                state=state if state_changed else UNSET,
                capabilities=acp_subagents.SubagentCapabilities(cancel={} if can_cancel else None)
                if caps_changed
                else UNSET,
            ),
        )

    def codex_lost(self, _reason: str) -> None:
        for record in self.hub.threads.children():
            reported = record.reported
            if reported is not None and reported.state in ("running", "requires_action"):
                record.turn = None
                record.lost = True
                self.report(record)

    # -- cancel -----------------------------------------------------------------------------------

    def cancel_tree(self, session_id: str) -> None:
        """Stop the current work of ``session_id``'s children and all their descendants
        (and of ``session_id`` itself when it is a child): Codex does not cascade."""
        # Only running work is marked: a cancel never outlives the work it stopped,
        # so an idle child takes its next assignment normally.
        threads = self.hub.threads
        record = threads.session(session_id)
        root_turn = record.turn if record is not None and record.parent_id is None else None
        if record is not None and root_turn is not None and root_turn.id is not None:
            record.cancelled_turns.add(root_turn.id)
        targets = [record] if record is not None and record.is_child else []
        for child in targets + threads.descendants(session_id):
            if child.turn is not None:
                child.turn.cancel_requested = True
                self._interrupt(child)
            if child.id != session_id:
                self._cancel_questions(child.id)

    def _interrupt(self, record: ThreadRecord) -> None:
        turn = record.turn
        if turn is None or turn.id is None or turn.interrupt_sent:
            return
        turn.interrupt_sent = True

        def refused(error: ErrorObject) -> None:
            # The turn may have just ended; its turn/completed reports what happened.
            log.info("turn/interrupt of %s refused: %s", record.id, error.message)
            turn.interrupt_refused = True
            self._interrupt_refused()

        self.hub.codex_request(
            "turn/interrupt",
            codex_types.TurnInterruptParams(threadId=record.id, turnId=turn.id),
            None,
            lambda _result: None,
            refused,
        )


def text_message(
    message_id: str, sender: str, recipient: str, text: str
) -> acp_subagents.SessionMessage:
    """One session-to-session message of plain text (outgoing or incoming view alike)."""
    return acp_subagents.SessionMessage(
        messageId=message_id,
        senderSessionId=sender,
        recipientSessionId=recipient,
        content=[acp_types.TextContent(text=text)],
    )


def _final_status(item: codex_items.CollabAgentToolCallItem) -> acp_tools.ToolCallStatus:
    return "completed" if item.status == "completed" else "failed"


def _running_turn(held: list[Held]) -> str | None:
    """The turn held traffic says is running (started, not completed), if any."""
    running: str | None = None
    for message in held:
        if isinstance(message.params, codex_types.TurnNotification):
            if message.method == "turn/started":
                running = message.params.turn.id
            elif message.method == "turn/completed" and running == message.params.turn.id:
                running = None
    return running


def _root_turn_of(held: list[Held]) -> str | None:
    """The root turn held traffic says the thread works for (its ``turn/started``)."""
    for message in held:
        if message.method == "turn/started" and isinstance(
            message.params, codex_types.TurnNotification
        ):
            return message.params.turn.rootTurnId
    return None


def _unplaced(record: ThreadRecord) -> Unplaced:
    if record.unplaced is None:
        record.unplaced = Unplaced()
    return record.unplaced
