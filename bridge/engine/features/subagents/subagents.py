"""Codex sub-agents as ACP subagent sessions (the Subagent Sessions RFD).

A Codex sub-agent is a thread of its own; its session id is its thread id.
Codex sends no ``thread/started`` for a child and its first events (status,
even its turn) arrive before the parent's spawn item names it, so the engine
does not know at first that a thread is a child, or whose. The rules
(:class:`Subagents` is what the engine wires; it hands each rule to the part that
keeps it):

1. **Hold, then announce.** Traffic for a thread no session shows is held, and the
   thread read to learn its parent; a child is announced on its parent's stream
   (``subagent_update``: Codex's nickname, its role) before its held traffic is
   handled, ancestors before descendants. Parentage is never guessed. See
   :mod:`bridge.engine.features.subagents._placement`.
2. **Messages, not tool calls.** A spawn or ``send_input`` is a
   ``session_message`` in the sender's transcript (outgoing view); the child's
   own user message is the incoming view in its transcript; a result the
   parent receives (``wait``) is an incoming message in the parent's. ``wait``,
   ``close_agent`` and ``resume_agent`` stay tool calls of the session that made
   them. Here; what each looks like: :mod:`bridge.engine.features.subagents._collab_views`.
3. **Work state on the parent.** ``running`` / ``requires_action`` / ``idle`` (with
   the turn's stop reason) / ``unknown`` (Codex lost), each sent once, and
   ``capabilities.cancel`` exactly while the child's turn can be interrupted.
4. **Cancel.** ``session/cancel`` on a session reaches every active descendant
   (and the child itself), because Codex does not cascade. Rules 3 and 4:
   :mod:`bridge.engine.features.subagents._work`.
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

from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import items as codex_items
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....codex.messages import ItemNotification
from ....jsonrpc import ErrorCode, RpcError
from ...core.hub import Hub
from ...core.record_parts import HeldMessage
from ...core.threads import ThreadRecord
from ...views.history import Nicknames
from . import _collab_views as collab_views
from ._placement import Placement
from ._work import Commands, Questions, SubagentWork

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


class Subagents:
    """Places sub-agent threads, shows their messages and work state, cancels their work.

    ``questions`` answers
    ``cancel`` to what a thread asked (a cancel's cascade); ``terminals`` stops the
    commands cancelled work left running.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        questions: Questions,
        terminals: Commands,
    ) -> None:
        self.hub = hub
        self.work = SubagentWork(hub, questions=questions, terminals=terminals)
        self.placement = Placement(hub, work=self.work)

    # -- where a thread's traffic goes (bridge.engine.features.subagents._placement) ----------

    def gate(self, thread_id: str, held: HeldMessage) -> bool:
        """Hold traffic for a thread no session shows (``True``) until it is placed."""
        return self.placement.gate(thread_id, held)

    def session_added(self, record: ThreadRecord) -> None:
        """A thread became a session: what was held for it is handled now."""
        self.placement.session_added(record)

    def open_failed(self, thread_id: str) -> None:
        """A load, resume or fork of ``thread_id`` failed: what waited for it is no session's."""
        self.placement.open_failed(thread_id)

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

    # -- work state and cancel (bridge.engine.features.subagents._work) ------------------------

    def status_changed(self, note: codex_types.ThreadStatusChanged) -> None:
        self.work.status_changed(note)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        self.work.turn_started(note)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        self.work.turn_completed(note)

    def report(self, record: ThreadRecord) -> None:
        """Send the child's work state (and cancel capability) on its parent's stream, if changed."""
        self.work.report(record)

    def codex_lost(self, reason: str) -> None:
        self.work.codex_lost(reason)
        self.placement.codex_lost()

    def thread_gone(self, note: codex_threads.ThreadGone) -> None:
        """Codex closed (unloaded), deleted or archived a thread: one no session here shows
        is forgotten."""
        self.placement.thread_gone(note)

    def cancel_tree(self, session_id: str) -> None:
        """Stop the current work of ``session_id``'s descendants (and its own, if a child)."""
        self.work.cancel_tree(session_id)

    def cancel_work(self, session_id: str) -> None:
        """Cancel the work under ``session_id``: its sub-agents' turns, then the commands
        the cancelled threads left running."""
        self.work.cancel_work(session_id)

    # -- spawn, send_input, wait, close: messages and tool calls -----------------------------

    def item_started(self, note: ItemNotification) -> None:
        item = note.item
        if not isinstance(item, codex_items.CollabAgentToolCallItem):
            return
        record = self.hub.threads.session(note.threadId)
        if record is not None and self._as_tool_call(item):
            record.open_collab[item.id] = item
            self.hub.client.update(
                note.threadId, collab_views.tool_call(item, "in_progress", self._nickname())
            )

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
        if collab_views.is_message(item) and exposing:
            for receiver in item.receiverThreadIds:
                self._message_to(thread_id, receiver, item)
        if self._as_tool_call(item) and item.id not in record.tools.ended:
            self.hub.client.update(thread_id, collab_views.final_update(item, self._nickname()))
            self._retitle_when_placed(thread_id, item)
        for receiver in item.receiverThreadIds:
            child = self.hub.threads.session(receiver)
            if child is not None and child.is_child and child.nickname is None:
                self.placement.read_name(receiver)  # Codex names its sub-agents by now
        if item.tool == "wait" and exposing:
            for receiver, message in collab_views.results(item):
                send = self._incoming_result(thread_id, receiver, f"{item.id}/{receiver}", message)
                known = self.hub.threads.get(receiver)
                if known is not None and known.is_child:
                    send()
                elif known is not None and known.placing.unplaced is not None:
                    # Its announcement is still on its way: the message names it, so after.
                    known.placing.once_announced(send)

    def _message_to(
        self, sender: str, receiver: str, item: codex_items.CollabAgentToolCallItem
    ) -> None:
        prompt = item.prompt or ""
        threads = self.hub.threads
        child = threads.get(receiver)
        if child is not None and child.is_child:
            if child.visible:
                self.hub.client.update(
                    sender, collab_views.text_message(item.id, sender, receiver, prompt)
                )
            return

        def send() -> None:
            placed = threads.session(receiver)
            if placed is not None and placed.is_child and placed.visible:
                self.hub.client.update(
                    sender, collab_views.text_message(item.id, sender, receiver, prompt)
                )

        # Not announced yet (its traffic is held): send the message right after the
        # announcement, which it needs (it names the child). Queued before the spawn's
        # word on its parent, which may place it at once (its read failed): placing it
        # sends what is queued.
        record = threads.record(receiver)
        record.placing.once_announced(send)
        if item.tool == "spawnAgent":
            self.placement.hint_parent(receiver, sender)
        if not record.session:
            self.placement.read_parentage(receiver)

    def _incoming_result(
        self, recipient: str, sender: str, message_id: str, text: str
    ) -> Callable[[], None]:
        def send() -> None:
            child = self.hub.threads.session(sender)
            if child is not None and child.is_child and child.visible:
                self.hub.client.update(
                    recipient, collab_views.text_message(message_id, sender, recipient, text)
                )

        return send

    def _incoming_user_message(self, thread_id: str, message: codex_types.UserMessageItem) -> None:
        child = self.hub.threads.session(thread_id)
        if child is None or not child.is_child or not child.visible or child.parent_id is None:
            return
        texts = [part.get("text", "") for part in message.content if part.get("type") == "text"]
        # A child's user message comes from its parent (spawn or send_input): the
        # incoming view of that message, in the child's own transcript.
        self.hub.client.update(
            child.id,
            collab_views.text_message(message.id, child.parent_id, child.id, "\n".join(texts)),
        )

    def _retitle_when_placed(
        self, session_id: str, item: codex_items.CollabAgentToolCallItem
    ) -> None:
        """A finished tool call that names a sub-agent still being placed (its nickname not
        known yet) is retitled once it is: the same title a replay of the item gives it."""
        placing = self.placement.being_placed(item.receiverThreadIds)
        if not placing:
            return
        shown = [collab_views.title(item, self._nickname())]

        def retitle() -> None:
            nickname = self._nickname()
            title = collab_views.title(item, nickname)
            if title != shown[0]:
                shown[0] = title
                update = acp_tools.ToolCallUpdate(
                    toolCallId=item.id,
                    title=title,
                    content=collab_views.states_content(item, nickname),
                )
                self.hub.client.update(session_id, update)

        for record in placing:
            self.placement.when_named(record, retitle)

    def _as_tool_call(self, item: codex_items.CollabAgentToolCallItem) -> bool:
        """wait / close / resume are tool calls; spawn and send_input only without the capability."""
        return not collab_views.is_message(item) or not self.hub.subagents_exposed

    def _nickname(self, nicknames: Nicknames | None = None) -> collab_views.Nickname:
        """Codex's nickname for a sub-agent: in ``nicknames`` (the threads a replay read),
        else the registry's."""

        def nickname(thread_id: str) -> str | None:
            found = nicknames.get(thread_id) if nicknames is not None else None
            if found is None:
                child = self.hub.threads.session(thread_id)
                found = child.nickname if child is not None and child.is_child else None
            return found

        return nickname

    def history_item(
        self, session_id: str, nicknames: Nicknames | None = None
    ) -> Callable[[Any], list[msgspec.Struct] | None]:
        """How a load replays the collab items of ``session_id``'s history. ``nicknames``:
        Codex's nicknames of the sub-agents the load read, which title the tool calls that
        name them as the live ones were titled."""

        def replay(item: Any) -> list[msgspec.Struct] | None:
            if not isinstance(item, codex_items.CollabAgentToolCallItem):
                return None
            return collab_views.history_updates(
                item,
                session_id,
                self._nickname(nicknames),
                as_tool_call=self._as_tool_call(item),
                exposing=self.hub.subagents_exposed,
            )

        return replay

    def turn_ending(self, note: codex_types.TurnNotification) -> None:
        """A turn that ended interrupted or failed ends its collab tool calls still open
        (a ``wait`` Codex never completes), before the prompt's answer, as
        :meth:`bridge.engine.features.tools.tools.Tools.turn_completed` does for tool items."""
        record = self.hub.threads.session(note.threadId)
        status = note.turn.status
        if record is None or status not in ("interrupted", "failed") or not record.open_collab:
            return
        for item in record.open_collab.values():
            cause = "was cancelled" if status == "interrupted" else "failed"
            note_text = acp_tools.Content(
                content=acp_types.TextContent(text=f"The turn {cause} before this finished.")
            )
            self.hub.client.update(
                record.id,
                acp_tools.ToolCallUpdate(toolCallId=item.id, status="failed", content=[note_text]),
            )
        record.tools.end_with_turn(record.open_collab)
        record.open_collab.clear()
