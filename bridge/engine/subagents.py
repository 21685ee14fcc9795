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
   reason) / ``unknown`` (Codex lost), each sent once. ``capabilities.cancel``
   is advertised exactly while the child has a turn the bridge can interrupt.
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, Raw

from ..acp import subagents as acp
from ..acp import tools as acp_tools
from ..acp import types as acp_types
from ..codex import threads
from ..codex import types as codex
from ..jsonrpc import ErrorCode, RpcError
from ..jsonrpc.peer import ErrorObject
from . import history
from .sessions import Session

if TYPE_CHECKING:
    from .engine import Engine

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
    }
)
#: Messages held for one thread before the oldest notifications are dropped.
MAX_HELD = 10_000


class _Collab(msgspec.Struct, kw_only=True):
    """A ``collabAgentToolCall`` item (the members the bridge reads)."""

    id: str
    tool: str
    status: str = ""
    senderThreadId: str = ""
    receiverThreadIds: list[str] = msgspec.field(default_factory=list)
    prompt: str | None = None
    agentsStates: dict[str, Any] = msgspec.field(default_factory=dict)


class _CollabNote(msgspec.Struct):
    threadId: str
    item: Raw


class _ItemHead(msgspec.Struct):
    type: str = ""


class _UserMessage(msgspec.Struct):
    id: str
    content: list[dict[str, Any]] = msgspec.field(default_factory=list)


class _TurnHead(msgspec.Struct):
    id: str
    status: str = ""
    rootTurnId: str | None = None
    error: codex.TurnError | None = None


class _TurnNote(msgspec.Struct):
    threadId: str
    turn: _TurnHead


@dataclass(slots=True)
class Child:
    """What the bridge knows of one sub-agent thread."""

    thread_id: str
    parent_id: str
    title: str | None = None
    description: str | None = None
    visible: bool = True
    #: The turn the child is running now (what ``session/cancel`` interrupts).
    turn_id: str | None = None
    interrupt_sent_for: str | None = None
    #: The root turn its current turn works for (Codex's ``rootTurnId``).
    root_turn_id: str | None = None
    #: A cancel (its own, or an ancestor's) reached its running turn; its
    #: descendants' turns that start now are interrupted too. Cleared when the turn ends.
    cancelling: bool = False
    #: The last state and capabilities sent on the parent's stream.
    state: acp.WorkState | None = None
    can_cancel: bool = False


@dataclass(slots=True)
class _Unknown:
    """A thread seen before anyone said whose it is."""

    held: list[bytes] = field(default_factory=list)
    reading: bool = False
    read_failed: bool = False
    #: The parent named by a spawn item, before the thread read came back.
    parent_hint: str | None = None
    root_turn_hint: str | None = None


class Subagents:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.children: dict[str, Child] = {}
        self._unknown: dict[str, _Unknown] = {}
        self._ignored: set[str] = set()
        #: Parent thread id → child threads waiting for that parent to become known.
        self._waiting_on: dict[str, list[str]] = {}
        #: Child thread id → what to send once it is announced (messages naming it).
        self._after_announce: dict[str, list[Callable[[], None]]] = {}
        #: Root turns the client cancelled: a child turn working for one is stopped.
        self._cancelled_turns: set[str] = set()
        #: Nickname, role, cwd of children read before their parent was known.
        self._pending_identity: dict[str, tuple[str | None, str | None, str]] = {}
        engine.thread_gate = self._gate
        engine.session_added_hooks.append(self._on_session_added)
        engine.request_guards.append(self._guard)
        engine.on_client_notification("session/cancel", self._on_session_cancel)
        engine.on_codex_notification("item/started", self._on_item_started)
        engine.on_codex_notification("item/completed", self._on_item_completed)
        engine.on_codex_notification("thread/status/changed", self._on_status)
        engine.on_codex_notification("turn/started", self._on_turn_started)
        engine.on_codex_notification("turn/completed", self._on_turn_completed)
        engine.lost_hooks.append(self._on_codex_lost)
        engine.session_announced_hooks.append(self._after_response)
        #: Root session → children whose history a load replayed (current state follows the response).
        self._replayed: dict[str, list[Child]] = {}

    @property
    def exposing(self) -> bool:
        """The client declared ``subagents``: children are shown as sessions."""
        return self.engine.client_capabilities.subagents is not None

    # -- where a thread's traffic goes -----------------------------------------------

    def _gate(self, thread_id: str, data: bytes) -> bool:
        if thread_id in self._ignored:
            return True
        unknown = self._unknown.setdefault(thread_id, _Unknown())
        if len(unknown.held) >= MAX_HELD:
            log.warning(
                "thread %s: too much traffic before its parent is known; dropping", thread_id
            )
            return True
        unknown.held.append(data)
        self._read(thread_id)
        return True

    def _read(self, thread_id: str) -> None:
        unknown = self._unknown.setdefault(thread_id, _Unknown())
        if unknown.reading:
            return
        unknown.reading = True

        def read(result: Raw) -> None:
            stored = msgspec.json.decode(result, type=threads.ThreadReadResult).thread
            self._learned(
                thread_id, stored.parentThreadId, stored.agentNickname, stored.agentRole, stored.cwd
            )

        def failed(error: ErrorObject) -> None:
            log.info("thread/read %s failed: %s", thread_id, error.message)
            unknown.reading = False  # a spawn item naming it may ask again
            unknown.read_failed = True
            self._parent_unreadable(thread_id)

        self.engine.codex_request(
            "thread/read", threads.ThreadReadParams(threadId=thread_id), read, failed
        )

    def _learned(
        self, thread_id: str, parent: str | None, nickname: str | None, role: str | None, cwd: str
    ) -> None:
        unknown = self._unknown.get(thread_id)
        if unknown is None or thread_id in self.engine.sessions:
            return
        parent = parent or unknown.parent_hint
        if parent is None:
            # Not a sub-agent: another client's thread, or one of ours still being
            # created (its thread/start answer registers it; nothing held matters).
            self._ignore(thread_id)
            return
        if parent in self.engine.sessions:
            self._adopt(thread_id, parent, nickname, role, cwd)
        elif parent in self._ignored:
            self._ignore(thread_id)
        else:
            # A nested child whose parent is not known yet: learn the parent first,
            # so ancestors are announced parent before child.
            self._waiting_on.setdefault(parent, []).append(thread_id)
            unknown.reading = True  # keep its held traffic until the parent resolves
            self._pending_identity[thread_id] = (nickname, role, cwd)
            self._read(parent)

    def _parent_unreadable(self, thread_id: str) -> None:
        """``thread_id``'s parentage cannot be read: use what else is known, guess nothing."""
        unknown = self._unknown.get(thread_id)
        if unknown is None or thread_id in self.engine.sessions:
            return
        if unknown.parent_hint is not None and unknown.parent_hint in self.engine.sessions:
            self._adopt(thread_id, unknown.parent_hint, None, None, "")
            return
        root = self._root_for_turn(unknown)
        if root is not None:
            # Parentage unknown: never announced, represented on its root session.
            self._adopt(thread_id, root, None, None, "", announce=False)
        # Children waiting for this one to be placed cannot be announced under it
        # (their chain is broken): each is represented on its root, if it has one.
        for waiting in self._waiting_on.pop(thread_id, []):
            self._pending_identity.pop(waiting, None)
            self._parent_unreadable(waiting)
        # Otherwise its traffic stays held: a spawn item may still name its parent.

    def _root_for_turn(self, unknown: _Unknown) -> str | None:
        root_turn = unknown.root_turn_hint
        for data in unknown.held:
            if b'"turn/started"' in data:
                note = msgspec.json.decode(data, type=_Envelope)
                if note.params is not None and note.params.turn.rootTurnId:
                    root_turn = note.params.turn.rootTurnId
        if root_turn is None:
            return None
        for session in self.engine.sessions.values():
            if (
                session.parent_id is None
                and session.prompt is not None
                and session.prompt.turn_id == root_turn
            ):
                return session.session_id
        return None

    def _ignore(self, thread_id: str) -> None:
        unknown = self._unknown.pop(thread_id, None)
        self._ignored.add(thread_id)
        for waiting in self._waiting_on.pop(thread_id, []):
            self._ignore(waiting)
        if unknown is not None and unknown.held:
            # Not ours: another client on the same app-server owns this thread and
            # answers its questions. Answering them here would pre-empt that client.
            log.info(
                "thread %s belongs to no session here; dropping %d held message(s)",
                thread_id,
                len(unknown.held),
            )

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
        parent = self.engine.sessions[parent_id]
        visible = announce and self.exposing and parent.visible
        child = Child(thread_id, parent_id, title=nickname, description=role, visible=visible)
        self.children[thread_id] = child
        if visible:
            self.engine.update(
                parent_id,
                acp.SubagentUpdate(
                    sessionId=thread_id,
                    title=nickname if nickname else UNSET,
                    description=role if role else UNSET,
                ),
            )
        session = Session(
            session_id=thread_id, cwd=cwd or parent.cwd, parent_id=parent_id, visible=visible
        )
        self.engine.add_session(session)  # releases the held traffic (_on_session_added)
        for deferred in self._after_announce.pop(thread_id, []):
            deferred()
        for waiting in self._waiting_on.pop(thread_id, []):
            nickname, role, cwd = self._pending_identity.pop(waiting, (None, None, ""))
            self._adopt(waiting, thread_id, nickname, role, cwd)

    def _on_session_added(self, session: Session) -> None:
        self._ignored.discard(session.session_id)
        unknown = self._unknown.pop(session.session_id, None)
        if unknown is not None:
            for data in unknown.held:
                self.engine.refeed_codex(data)
        for waiting in self._waiting_on.pop(session.session_id, []):
            nickname, role, cwd = self._pending_identity.pop(waiting, (None, None, ""))
            if waiting in self._unknown:
                self._adopt(waiting, session.session_id, nickname, role, cwd)

    def ask_target(self, thread_id: str) -> tuple[str, str | None]:
        """Where to ask a question of ``thread_id``: its own session, or (hidden child)
        its root, with the agent's name to say who asks."""
        child = self.children.get(thread_id)
        if child is None or child.visible:
            return thread_id, None
        label = child.title or "a sub-agent"
        session_id = thread_id
        while session_id in self.children and not self.children[session_id].visible:
            session_id = self.children[session_id].parent_id
        return session_id, label

    def _guard(self, method: str, session_id: str) -> None:
        child = self.children.get(session_id)
        if child is not None and method in RESTRICTED:
            name = f" ({child.title})" if child.title else ""
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"{method}: session {session_id}{name} is a subagent session of {child.parent_id}; "
                "clients can only cancel it (session/cancel)",
                {"sessionId": session_id, "parentSessionId": child.parent_id},
            )

    # -- spawn, send_input, wait, close: messages and tool calls -----------------------------

    def _collab(self, raw: Raw) -> tuple[str, _Collab] | None:
        note = msgspec.json.decode(raw, type=_CollabNote)
        if _ITEM_HEAD.decode(note.item).type != "collabAgentToolCall":
            return None
        return note.threadId, msgspec.json.decode(note.item, type=_Collab)

    def _on_item_started(self, raw: Raw) -> None:
        found = self._collab(raw)
        if found is None:
            return
        thread_id, item = found
        if thread_id in self.engine.sessions and self._as_tool_call(item):
            self.engine.update(thread_id, self._tool_call(item, "in_progress"))

    def _on_item_completed(self, raw: Raw) -> None:
        found = self._collab(raw)
        if found is None:
            self._maybe_incoming_user_message(raw)
            return
        thread_id, item = found
        if thread_id not in self.engine.sessions:
            return
        if item.tool in ("spawnAgent", "sendInput") and self.exposing:
            for receiver in item.receiverThreadIds:
                self._message_to(thread_id, receiver, item)
        if self._as_tool_call(item):
            self.engine.update(
                thread_id,
                acp_tools.ToolCallUpdate(
                    toolCallId=item.id,
                    title=self._tool_title(item),
                    status="completed" if item.status == "completed" else "failed",
                    content=self._states_content(item),
                    rawOutput={"agentsStates": item.agentsStates},
                ),
            )
        if item.tool == "wait" and self.exposing:
            for receiver, state in item.agentsStates.items():
                message = state.get("message") if isinstance(state, dict) else None
                if not message:
                    continue
                send = self._incoming_result(thread_id, receiver, f"{item.id}/{receiver}", message)
                if receiver in self.children:
                    send()
                elif receiver in self._unknown:
                    # Its announcement is still on its way: the message names it, so after.
                    self._after_announce.setdefault(receiver, []).append(send)

    def _message_to(self, sender: str, receiver: str, item: _Collab) -> None:
        prompt = item.prompt or ""
        child = self.children.get(receiver)
        if child is not None:
            if child.visible:
                self._outgoing(sender, receiver, item.id, prompt)
            return
        # Not announced yet (its traffic is held): note its parent and send the
        # message right after the announcement, which it needs (it names the child).
        if item.tool == "spawnAgent":
            self._hint_parent(receiver, sender)
        self._after_announce.setdefault(receiver, []).append(
            lambda: self._outgoing(sender, receiver, item.id, prompt)
        )
        self._read(receiver)

    def _hint_parent(self, thread_id: str, parent_id: str) -> None:
        """A spawn item names ``thread_id``'s parent: Codex's own word, enough to adopt it."""
        self._ignored.discard(thread_id)
        unknown = self._unknown.setdefault(thread_id, _Unknown())
        unknown.parent_hint = parent_id
        if unknown.read_failed:
            # Its thread could not be read: the spawn item alone establishes it.
            self._adopt(thread_id, parent_id, None, None, "")

    def _incoming_result(
        self, recipient: str, sender: str, message_id: str, text: str
    ) -> Callable[[], None]:
        def send() -> None:
            child = self.children.get(sender)
            if child is not None and child.visible and recipient not in self.engine.hidden:
                self.engine.update(recipient, _text_message(message_id, sender, recipient, text))

        return send

    def _outgoing(self, sender: str, receiver: str, message_id: str, prompt: str) -> None:
        if sender in self.engine.hidden:
            return
        self.engine.update(sender, _text_message(message_id, sender, receiver, prompt))

    def _maybe_incoming_user_message(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=_CollabNote)
        child = self.children.get(note.threadId)
        if child is None or not child.visible or _ITEM_HEAD.decode(note.item).type != "userMessage":
            return
        message = msgspec.json.decode(note.item, type=_UserMessage)
        texts = [part.get("text", "") for part in message.content if part.get("type") == "text"]
        # A child's user message comes from its parent (spawn or send_input): the
        # incoming view of that message, in the child's own transcript.
        self.engine.update(
            child.thread_id,
            _text_message(message.id, child.parent_id, child.thread_id, "\n".join(texts)),
        )

    def _tool_call(
        self,
        item: _Collab,
        status: acp_tools.ToolCallStatus,
        content: list[Any] | msgspec.UnsetType = UNSET,
    ) -> acp_tools.ToolCall:
        raw_input = {"tool": item.tool, "targets": item.receiverThreadIds, "prompt": item.prompt}
        return acp_tools.ToolCall(
            toolCallId=item.id,
            title=self._tool_title(item),
            kind="other",
            status=status,
            content=content,
            rawInput=raw_input,
        )

    def _as_tool_call(self, item: _Collab) -> bool:
        """wait / close / resume are tool calls; spawn and send_input only without the capability."""
        return item.tool not in ("spawnAgent", "sendInput") or not self.exposing

    def _name(self, thread_id: str) -> str:
        child = self.children.get(thread_id)
        return (child.title if child is not None and child.title else None) or "sub-agent"

    def _tool_title(self, item: _Collab) -> str:
        names = ", ".join(self._name(t) for t in item.receiverThreadIds) or "sub-agent"
        return {
            "spawnAgent": f"Spawn {names}",
            "sendInput": f"Message {names}",
            "wait": f"Wait for {names}",
            "closeAgent": f"Close {names}",
            "resumeAgent": f"Resume {names}",
        }.get(item.tool, f"{item.tool} {names}")

    def _states_content(self, item: _Collab) -> list[Any] | msgspec.UnsetType:
        lines = []
        if item.prompt and item.tool in ("spawnAgent", "sendInput"):
            lines.append(item.prompt)
        for thread_id, state in item.agentsStates.items():
            if isinstance(state, dict):
                status = state.get("status", "")
                message = state.get("message")
                lines.append(
                    f"{self._name(thread_id)}: {status}" + (f"\n{message}" if message else "")
                )
        if not lines:
            return UNSET
        return [acp_tools.Content(content=acp_types.TextContent(text="\n\n".join(lines)))]

    # -- work state ------------------------------------------------------------------------------

    def _on_status(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=codex.ThreadStatusChanged)
        child = self.children.get(note.threadId)
        if child is None:
            return
        status = note.status
        if status.type == "active":
            waiting = {"waitingOnApproval", "waitingOnUserInput"} & set(status.activeFlags)
            self._report(child, acp.WorkState(state="requires_action" if waiting else "running"))
        elif status.type == "idle" and child.turn_id is None:
            # Idle between turns; a turn's end is reported from turn/completed, with its reason.
            if child.state is None:
                self._report(child, acp.WorkState(state="idle"))
        elif status.type == "systemError":
            self._report(
                child, acp.WorkState(state="idle", meta={"error": "Codex reports a system error"})
            )

    def _on_turn_started(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=_TurnNote)
        child = self.children.get(note.threadId)
        if child is None:
            return
        child.turn_id = note.turn.id
        child.root_turn_id = note.turn.rootTurnId
        self._report(child, acp.WorkState(state="running"), can_cancel=True)
        if self._work_cancelled(child):
            # A turn of work the client cancelled (Codex does not cascade): stop it now.
            child.cancelling = True
            self._interrupt(child)

    def _on_turn_completed(self, raw: Raw) -> None:
        note = msgspec.json.decode(raw, type=_TurnNote)
        child = self.children.get(note.threadId)
        if child is None:
            return
        if child.turn_id == note.turn.id:
            child.turn_id = None
            child.cancelling = False
        status = note.turn.status
        if status == "completed":
            state = acp.WorkState(state="idle", stopReason="end_turn")
        elif status == "interrupted":
            state = acp.WorkState(state="idle", stopReason="cancelled")
        else:
            error = note.turn.error.message if note.turn.error else f"turn {status}"
            state = acp.WorkState(state="idle", stopReason=None, meta={"error": error})
        self._report(child, state, can_cancel=False)

    def _report(
        self, child: Child, state: acp.WorkState, *, can_cancel: bool | None = None
    ) -> None:
        """Send the child's state (and cancel capability) on its parent's stream, if changed."""
        if can_cancel is None:
            can_cancel = child.can_cancel
        state_changed = child.state != state
        caps_changed = child.can_cancel != can_cancel
        child.state = state
        child.can_cancel = can_cancel
        if not child.visible or not (state_changed or caps_changed):
            return
        self.engine.update(
            child.parent_id,
            acp.SubagentUpdate(
                sessionId=child.thread_id,
                state=state if state_changed else UNSET,
                capabilities=acp.SubagentCapabilities(cancel={} if can_cancel else None)
                if caps_changed
                else UNSET,
            ),
        )

    def _on_codex_lost(self, _reason: str) -> None:
        for child in self.children.values():
            if child.state is not None and child.state.state in ("running", "requires_action"):
                child.turn_id = None
                self._report(child, acp.WorkState(state="unknown"), can_cancel=False)

    # -- session/load: children's associations and histories ------------------------------------

    def history_item(self, session_id: str) -> Callable[[Raw], list[msgspec.Struct] | None]:
        """How a load replays the collab items of ``session_id``'s history."""

        def replay(raw: Raw) -> list[msgspec.Struct] | None:
            if _ITEM_HEAD.decode(raw).type != "collabAgentToolCall":
                return None
            item = msgspec.json.decode(raw, type=_Collab)
            out: list[msgspec.Struct] = []
            if self._as_tool_call(item):
                status: acp_tools.ToolCallStatus = (
                    "completed" if item.status == "completed" else "failed"
                )
                out.append(self._tool_call(item, status, self._states_content(item)))
            elif item.prompt is not None:
                # A historical address is no announcement (RFD): the recipient may be
                # announced later in this replay, or never.
                several = len(item.receiverThreadIds) > 1
                out += [
                    _text_message(
                        f"{item.id}/{receiver}" if several else item.id,
                        session_id,
                        receiver,
                        item.prompt,
                    )
                    for receiver in item.receiverThreadIds
                ]
            if item.tool == "wait" and self.exposing:
                for receiver, state in item.agentsStates.items():
                    message = state.get("message") if isinstance(state, dict) else None
                    if message:
                        out.append(
                            _text_message(f"{item.id}/{receiver}", receiver, session_id, message)
                        )
            return out

        return replay

    def replay_children(
        self, root: Session, stored: threads.StoredThread, then: Callable[[], None]
    ) -> None:
        """Replay the sub-agents ``stored`` spawned (and theirs), then call ``then``.

        Best effort, all before the load's response: each child's association
        (parent before child), then its own history. A child whose thread cannot
        be read keeps its association (the spawn item says whose it is) and a
        notice, where the client takes notices, says its history is missing.
        No state and no capability is sent here: current snapshots follow the
        response (:meth:`_after_response`).
        """
        if not self.exposing:
            then()
            return
        outstanding = 0
        replayed = self._replayed.setdefault(root.session_id, [])

        def visit(parent_id: str, thread: threads.StoredThread) -> None:
            nonlocal outstanding
            for child_id in _spawned(thread):
                if child_id in self.engine.sessions:
                    continue
                outstanding += 1
                self._read_history(parent_id, child_id, done)

        def done(parent_id: str, child_id: str, child_thread: threads.StoredThread | None) -> None:
            nonlocal outstanding
            outstanding -= 1
            child = self._restore(parent_id, child_id, child_thread)
            if child is not None:
                replayed.append(child)
                if child_thread is not None:
                    visit(child_id, child_thread)
            if outstanding == 0:
                then()

        visit(root.session_id, stored)
        if outstanding == 0:
            then()

    def _read_history(
        self,
        parent_id: str,
        child_id: str,
        done: Callable[[str, str, threads.StoredThread | None], None],
    ) -> None:
        def read(result: Raw) -> None:
            done(
                parent_id,
                child_id,
                msgspec.json.decode(result, type=threads.ThreadReadResult).thread,
            )

        def failed(error: ErrorObject) -> None:
            log.info("history of sub-agent %s unavailable: %s", child_id, error.message)
            done(parent_id, child_id, None)

        self.engine.codex_request(
            "thread/read",
            threads.ThreadReadParams(threadId=child_id, includeTurns=True),
            read,
            failed,
        )

    def _restore(
        self, parent_id: str, child_id: str, stored: threads.StoredThread | None
    ) -> Child | None:
        if child_id in self.engine.sessions or parent_id not in self.engine.sessions:
            return None
        nickname = stored.agentNickname if stored else None
        role = stored.agentRole if stored else None
        child = Child(child_id, parent_id, title=nickname, description=role)
        self.children[child_id] = child
        self.engine.update(
            parent_id,
            acp.SubagentUpdate(
                sessionId=child_id,
                title=nickname if nickname else UNSET,
                description=role if role else UNSET,
            ),
        )
        parent = self.engine.sessions[parent_id]
        self.engine.add_session(
            Session(
                session_id=child_id,
                cwd=(stored.cwd if stored else "") or parent.cwd,
                parent_id=parent_id,
            )
        )
        if stored is None:
            sessions = self.engine.client_capabilities.session or {}
            if sessions.get("notices") is not None:
                self.engine.update(
                    parent_id,
                    acp_types.Notice(
                        severity="warning",
                        title=f"The history of sub-agent {nickname or child_id} is not available",
                        description="Codex could not read its thread; its association is shown without it.",
                    ),
                )
            return child
        for update in _as_incoming(
            history.replay_updates(stored, first=self.history_item(child_id)), parent_id, child_id
        ):
            self.engine.update(child_id, update)
        if _last_turn_running(stored):
            child.turn_id = stored.turns[-1].id
        return child

    def _after_response(self, session: Session) -> None:
        """Current snapshots of the children a load replayed, now that history is over."""
        for child in self._replayed.pop(session.session_id, []):
            running = child.turn_id is not None
            self._report(
                child, acp.WorkState(state="running" if running else "idle"), can_cancel=running
            )

    # -- cancel -----------------------------------------------------------------------------------

    def _on_session_cancel(self, raw: Raw) -> None:
        try:
            params = msgspec.json.decode(raw or b"null", type=acp_types.CancelParams)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return  # the Prompts feature reports the bad notification
        self.cancel_tree(params.sessionId)

    def cancel_tree(self, session_id: str) -> None:
        """Stop the current work of ``session_id``'s children and all their descendants
        (and of ``session_id`` itself when it is a child): Codex does not cascade."""
        # Only running work is marked: a cancel never outlives the work it stopped,
        # so an idle child takes its next assignment normally.
        session = self.engine.sessions.get(session_id)
        prompt = session.prompt if session is not None and session.parent_id is None else None
        if prompt is not None and prompt.turn_id is not None:
            self._cancelled_turns.add(prompt.turn_id)
        targets = [self.children[session_id]] if session_id in self.children else []
        for child in targets + self._descendants(session_id):
            if child.turn_id is not None:
                child.cancelling = True
                self._interrupt(child)
            if child.thread_id != session_id:
                self.engine.approvals.cancel_thread(child.thread_id)

    def _work_cancelled(self, child: Child) -> bool:
        """Was the work ``child``'s current turn does cancelled: its root turn, or an
        ancestor's running turn that spawned or messaged it?"""
        if child.cancelling or (
            child.root_turn_id is not None and child.root_turn_id in self._cancelled_turns
        ):
            return True
        ancestor = self.children.get(child.parent_id)
        root_id = child.parent_id
        seen = 0
        while ancestor is not None and seen < 1000:
            if ancestor.cancelling:
                return True
            root_id = ancestor.parent_id
            ancestor = self.children.get(ancestor.parent_id)
            seen += 1
        # The root's prompt was cancelled before Codex named its turn.
        root = self.engine.sessions.get(root_id)
        prompt = root.prompt if root is not None else None
        return (
            prompt is not None
            and prompt.cancel_requested
            and child.root_turn_id is not None
            and prompt.turn_id == child.root_turn_id
        )

    def turn_cancelled(self, thread_id: str, turn_id: str | None) -> bool:
        """Is ``turn_id`` of sub-agent ``thread_id`` being cancelled? (Its questions are moot.)"""
        child = self.children.get(thread_id)
        return child is not None and child.turn_id == turn_id and self._work_cancelled(child)

    def _descendants(self, session_id: str) -> list[Child]:
        found: list[Child] = []
        frontier = [session_id]
        while frontier:
            parent = frontier.pop()
            for child in self.children.values():
                if child.parent_id == parent:
                    found.append(child)
                    frontier.append(child.thread_id)
        return found

    def _interrupt(self, child: Child) -> None:
        turn_id = child.turn_id
        if turn_id is None or child.interrupt_sent_for == turn_id:
            return
        child.interrupt_sent_for = turn_id

        def refused(error: ErrorObject) -> None:
            # The turn may have just ended; its turn/completed reports what happened.
            log.info("turn/interrupt of %s refused: %s", child.thread_id, error.message)

        self.engine.codex_request(
            "turn/interrupt",
            codex.TurnInterruptParams(threadId=child.thread_id, turnId=turn_id),
            lambda _result: None,
            refused,
        )


def _text_message(message_id: str, sender: str, recipient: str, text: str) -> acp.SessionMessage:
    """One session-to-session message of plain text (outgoing or incoming view alike)."""
    return acp.SessionMessage(
        messageId=message_id,
        senderSessionId=sender,
        recipientSessionId=recipient,
        content=[acp_types.TextContent(text=text)],
    )


def _spawned(thread: threads.StoredThread) -> list[str]:
    """The sub-agents a stored thread spawned, in order."""
    found: list[str] = []
    for turn in thread.turns:
        for raw in turn.items:
            if _ITEM_HEAD.decode(raw).type != "collabAgentToolCall":
                continue
            item = msgspec.json.decode(raw, type=_Collab)
            if item.tool == "spawnAgent":
                found += [t for t in item.receiverThreadIds if t not in found]
    return found


def _last_turn_running(thread: threads.StoredThread) -> bool:
    return bool(thread.turns) and thread.turns[-1].status == "inProgress"


def _as_incoming(
    updates: list[msgspec.Struct], parent_id: str, child_id: str
) -> list[msgspec.Struct]:
    """A child's stored user messages are what its parent sent it: incoming session messages."""
    out: list[msgspec.Struct] = []
    for update in updates:
        if isinstance(update, acp_types.UserMessageChunk) and isinstance(update.messageId, str):
            previous = out[-1] if out else None
            if isinstance(previous, acp.SessionMessage) and previous.messageId == update.messageId:
                assert isinstance(previous.content, list)
                previous.content.append(update.content)
                continue
            out.append(
                acp.SessionMessage(
                    messageId=update.messageId,
                    senderSessionId=parent_id,
                    recipientSessionId=child_id,
                    content=[update.content],
                )
            )
        else:
            out.append(update)
    return out


class _EnvelopeParams(msgspec.Struct):
    turn: _TurnHead


class _Envelope(msgspec.Struct):
    id: int | str | None = None
    method: str = ""
    params: _EnvelopeParams | None = None


_ITEM_HEAD = msgspec.json.Decoder(_ItemHead)
