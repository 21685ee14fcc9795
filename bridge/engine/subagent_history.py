"""``session/load`` of a root: its sub-agents' associations and histories (the RFD's replay).

Best effort, all before the load's response: each child's association (parent
before child), then its own history. A child whose thread cannot be read keeps
its association (the spawn item says whose it is) and a notice, where the client
takes notices, says its history is missing. No state and no capability is sent
during the replay: current snapshots follow the response
(:meth:`SubagentHistory.after_response`), the RFD's freshness boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from ..acp import subagents as acp_subagents
from ..acp import types as acp_types
from ..codex import items as codex_items
from ..codex import threads as codex_threads
from ..codex.messages import ThreadItem
from ..jsonrpc.peer import ErrorObject
from . import history
from .hub import Hub
from .threads import ThreadRecord, Turn

log = logging.getLogger(__name__)


class SubagentHistory:
    """Replays the sub-agents of a loaded root.

    ``history_item`` replays a session's collab items (spawns as messages);
    ``session_added`` is told of each child that becomes a session; ``report``
    sends a child's current work state.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        history_item: Callable[[str], history.ItemReplay],
        session_added: Callable[[ThreadRecord], None],
        report: Callable[[ThreadRecord], None],
    ) -> None:
        self.hub = hub
        self._history_item = history_item
        self._session_added = session_added
        self._report = report

    def replay_children(
        self, root: ThreadRecord, root_items: list[ThreadItem], then: Callable[[], None]
    ) -> None:
        """Replay the sub-agents the root's stored items spawned (and theirs), then ``then``."""
        if not self.hub.subagents_exposed:
            then()
            return
        outstanding = 0

        def visit(parent_id: str, items: list[ThreadItem]) -> None:
            nonlocal outstanding
            for child_id in _spawned(items):
                if self.hub.threads.session(child_id) is not None:
                    continue
                outstanding += 1
                self._read_history(parent_id, child_id, done)

        def done(
            parent_id: str, child_id: str, child_thread: codex_threads.StoredThread | None
        ) -> None:
            nonlocal outstanding
            outstanding -= 1
            items = history.stored_items(child_thread) if child_thread is not None else []
            child = self._restore(parent_id, child_id, child_thread, items)
            if child is not None:
                root.replayed.append(child)
                if child_thread is not None:
                    visit(child_id, items)
            if outstanding == 0:
                then()

        visit(root.id, root_items)
        if outstanding == 0:
            then()

    def _read_history(
        self,
        parent_id: str,
        child_id: str,
        done: Callable[[str, str, codex_threads.StoredThread | None], None],
    ) -> None:
        def read(result: codex_threads.ThreadReadResult) -> None:
            done(parent_id, child_id, result.thread)

        def failed(error: ErrorObject) -> None:
            log.info("history of sub-agent %s unavailable: %s", child_id, error.message)
            done(parent_id, child_id, None)

        self.hub.codex_request(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=child_id, includeTurns=True),
            codex_threads.ThreadReadResult,
            read,
            failed,
        )

    def _restore(
        self,
        parent_id: str,
        child_id: str,
        stored: codex_threads.StoredThread | None,
        items: list[ThreadItem],
    ) -> ThreadRecord | None:
        threads = self.hub.threads
        parent = threads.session(parent_id)
        if threads.session(child_id) is not None or parent is None:
            return None
        nickname = stored.agentNickname if stored else None
        role = stored.agentRole if stored else None
        self.hub.update(parent_id, acp_subagents.announcement(child_id, nickname, role))
        child = threads.add_child(
            child_id,
            parent,
            nickname=nickname,
            role=role,
            cwd=stored.cwd if stored else "",
            visible=True,
        )
        self._session_added(child)
        if stored is None:
            sessions = self.hub.client_capabilities.session or {}
            if sessions.get("notices") is not None:
                self.hub.update(
                    parent_id,
                    acp_types.Notice(
                        severity="warning",
                        title=f"The history of sub-agent {nickname or child_id} is not available",
                        description="Codex could not read its thread; its association is shown without it.",
                    ),
                )
            return child
        updates = history.replay_updates(child_id, items, first=self._history_item(child_id))
        for update in _as_incoming(updates, parent_id, child_id):
            self.hub.update(child_id, update)
        if stored.turns and stored.turns[-1].status == "inProgress":
            child.turn = Turn(id=stored.turns[-1].id)
        return child

    def after_response(self, root: ThreadRecord) -> None:
        """Current snapshots of the children a load replayed, now that history is over."""
        replayed, root.replayed = root.replayed, []
        for child in replayed:
            self._report(child)


def _spawned(items: list[ThreadItem]) -> list[str]:
    """The sub-agents a stored thread's items spawned, in order."""
    found: list[str] = []
    for item in items:
        if isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent":
            found += [t for t in item.receiverThreadIds if t not in found]
    return found


def _as_incoming(
    updates: list[msgspec.Struct], parent_id: str, child_id: str
) -> list[msgspec.Struct]:
    """A child's stored user messages are what its parent sent it: incoming session messages."""
    out: list[msgspec.Struct] = []
    for update in updates:
        if isinstance(update, acp_types.UserMessageChunk) and isinstance(update.messageId, str):
            previous = out[-1] if out else None
            if (
                isinstance(previous, acp_subagents.SessionMessage)
                and previous.messageId == update.messageId
            ):
                assert isinstance(previous.content, list)
                previous.content.append(update.content)
                continue
            out.append(
                acp_subagents.SessionMessage(
                    messageId=update.messageId,
                    senderSessionId=parent_id,
                    recipientSessionId=child_id,
                    content=[update.content],
                )
            )
        else:
            out.append(update)
    return out
