"""``session/load`` of a root: its history, its sub-agents' associations and theirs (the RFD's replay).

Best effort, all before the load's response. Every sub-agent the history spawned
(and theirs) is read first: Codex's nicknames for them title the collab tool
calls that name them (``Wait for Ampere``), in the root's history and in theirs,
exactly as the live calls were titled. Then the root's history; then each
child's association followed by its own history, parent before child (a child's
sub-agents right after it, in the order it spawned them). A child whose thread
cannot be read keeps its association (the spawn item says whose it is) and a
notice, where the client takes notices, says its history is missing. No state
and no capability is sent during the replay: current snapshots follow the
response (:meth:`SubagentHistory.after_response`), the RFD's freshness boundary.

Without the ``subagents`` capability no sub-agent is a session, but the threads
the root's collab items name are still read, for the same reason: there the
spawns and messages are tool calls too, titled with the sub-agent's nickname
when it ran. And what the live root showed of its hidden sub-agents is replayed
on it: a hidden sub-agent's command, file change or MCP call that asked for
permission was introduced on the root as a tool call (the item's id, titled
``NICKNAME: TITLE``, closed with the item's outcome). A stored thread does not
say which items asked, so each such item of every hidden sub-agent (and of
theirs) is replayed on the root in that form, right after the spawn that made
the sub-agent: its id, title and final status are the live ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import msgspec

from ....acp import subagents as acp_subagents
from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import items as codex_items
from ....codex import threads as codex_threads
from ....codex import types as codex_types
from ....codex.messages import ThreadItem
from ...core import exchanges, turns
from ...core.exchanges import Ask, Each, Exchange, Later, Refused, Steps
from ...core.hub import Hub
from ...core.record_parts import TurnKind
from ...core.threads import ThreadRecord
from ...views import history, tool_views
from ._history_pages import HistoryPages

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class _Tree:
    """The sub-agents a load read under its root."""

    #: Each sub-agent read, by id: its stored thread (``None``: it could not be read).
    stored: dict[str, codex_types.Thread | None] = field(default_factory=dict)
    #: Each sub-agent's stored items.
    items: dict[str, list[ThreadItem]] = field(default_factory=dict)
    #: The sub-agents each thread's history spawned, in order.
    spawned: dict[str, list[str]] = field(default_factory=dict)
    #: Every sub-agent a read was asked of.
    asked: set[str] = field(default_factory=set)

    def nicknames(self) -> history.Nicknames:
        return {i: s.agentNickname for i, s in self.stored.items() if s is not None}


class Children(Protocol):
    """What the history needs of the sub-agents feature."""

    def history_item(self, parent_id: str, nicknames: history.Nicknames) -> history.ItemReplay:
        """Replays a session's collab items (spawns as messages), with the nicknames read."""

    def session_added(self, record: ThreadRecord) -> None:
        """A child became a session."""

    def report(self, record: ThreadRecord) -> None:
        """Sends a child's current work state."""


class SubagentHistory:
    """Replays a loaded root's history and its sub-agents (``subagents``: what it
    replays through, see :class:`Children`)."""

    def __init__(self, hub: Hub, *, subagents: Children) -> None:
        self.hub = hub
        self._subagents = subagents

    def replay(
        self, root: ThreadRecord, stored: codex_types.Thread, then: Callable[[], None]
    ) -> None:
        """The whole replay of a ``session/load`` of ``stored`` (read before it was
        resumed): the sub-agents are read, then the root's stored items are replayed, then
        the commands it still runs, then the sub-agents' associations and histories; then
        ``then`` (the response). With the store paged (``Hub.paged_store``), the root's
        turns come a page at a time (:meth:`_pages_replayed`)."""
        exchanges.start(self.hub, self._replayed(root, stored, then))

    def _replayed(
        self, root: ThreadRecord, stored: codex_types.Thread, then: Callable[[], None]
    ) -> Exchange:
        if self.hub.setup.paged_store:
            yield from self._pages_replayed(root, stored, then)
            return
        root_items = history.stored_items(stored)
        tree = _Tree()
        yield from self._visit(root, tree, root.id, root_items)
        yield from self._finished(root, stored, tree, _tool_ids(root_items), root_items)
        then()

    def _pages_replayed(
        self, root: ThreadRecord, stored: codex_types.Thread, then: Callable[[], None]
    ) -> Exchange:
        """The root's history a page at a time (:class:`HistoryPages`), each page replayed
        as it arrives (after reading the sub-agents it names, whose nicknames title it)
        while Codex reads the next: only two pages of the history are held at a time, and
        the client sees the first updates after one page's worth of Codex's work, not the
        whole thread's."""
        tree = _Tree()
        tools: set[str] = set()
        threads = self.hub.threads
        # Codex subscribed this connection at the resume: what it says now of the thread
        # (token usage, another client's running turn) follows the history and the answer.
        threads.hold_traffic(root)
        # Another client's turn runs (the thread was active at the resume): the last turn
        # names it.
        foreign = root.turn is not None and root.turn.kind is TurnKind.FOREIGN
        page = partial(self._root_page, root, tree, tools)
        last = yield Later(
            lambda resume: HistoryPages(self.hub, root.id, page, resume, last_turn=foreign).start()
        )
        if last is not None:
            _last_turn(root, last)
        yield from self._finished(root, stored, tree, tools)
        then()  # the answer; then what Codex said meanwhile (:meth:`traffic_released`)

    def _root_page(
        self,
        root: ThreadRecord,
        tree: _Tree,
        tools: set[str],
        items: list[ThreadItem],
        replayed: Callable[[], None],
    ) -> None:
        """A page of the root's history: the sub-agents it names read first (they title its
        collab calls), then its updates."""
        tools.update(_tool_ids(items))
        exchanges.start(self.hub, self._page_replayed(root, tree, root.id, items, replayed))

    def _page_replayed(
        self,
        root: ThreadRecord,
        tree: _Tree,
        thread_id: str,
        items: list[ThreadItem],
        replayed: Callable[[], None],
        child: tuple[str, ThreadRecord] | None = None,
    ) -> Exchange:
        """A page of ``thread_id``'s history (the root's, or ``child``'s: its parent's id and
        record) replayed once the sub-agents it names are read."""
        yield from self._visit(root, tree, thread_id, items)
        if child is None:
            self._replay_root(root, items, tree)
        else:
            self._replay_child(child[0], child[1], items, tree.nicknames())
        replayed()

    def _replay_root(self, root: ThreadRecord, items: list[ThreadItem], tree: _Tree) -> None:
        """The updates that replay ``items`` of the root, titled with the sub-agents read."""
        first = self._subagents.history_item(root.id, tree.nicknames())
        if not self.hub.subagents_exposed:
            first = self._with_hidden(first, tree)
        phases = self.hub.handshake.air is not None
        terminals = self.hub.client.face.version == 2
        for update in history.replay_updates(
            root.id, items, first=first, cwd=root.cwd, phases=phases, terminals=terminals
        ):
            self.hub.client.update(root.id, update)

    def _finished(
        self,
        root: ThreadRecord,
        stored: codex_types.Thread,
        tree: _Tree,
        tools: set[str],
        root_items: list[ThreadItem] | None = None,
    ) -> Exchange:
        """After the root's history (or with it, ``root_items``, once the running commands
        are known): the commands it still runs, then the sub-agents'."""
        if (stored.status or {}).get("type", "notLoaded") == "notLoaded":
            # Not loaded in this Codex before the load: no command of it runs here.
            root.running_at_load = []
            running: list[msgspec.Struct] = []
        else:
            running = yield from _running(root, tools)
        if root_items is not None:
            self._replay_root(root, root_items, tree)
        for update in running:
            self.hub.client.update(root.id, update)
        if self.hub.subagents_exposed:
            yield from self._restored(root, tree)

    # -- reading the sub-agents -------------------------------------------------------------------

    def _visit(
        self, root: ThreadRecord, tree: _Tree, parent_id: str, items: list[ThreadItem]
    ) -> Exchange:
        """The sub-agents ``items`` (``parent_id``'s) name, each read side by side."""
        spawned = tree.spawned.setdefault(parent_id, [])
        targets = _spawned(items)
        spawned += [t for t in targets if t not in spawned]
        if not self.hub.subagents_exposed and parent_id == root.id:
            # Every sub-agent a collab tool call of the root names titles it.
            targets = _named(items)
        reads = []
        for child_id in targets:
            if child_id in tree.asked or self.hub.threads.session(child_id) is not None:
                continue
            tree.asked.add(child_id)
            reads.append(self._read_child(root, tree, child_id))
        yield Each(tuple(reads))

    def _read_child(self, root: ThreadRecord, tree: _Tree, child_id: str) -> Exchange:
        """Read a sub-agent, with its turns unless the store is paged: its history is
        replayed (with the capability, in its session; without it, what its root showed of
        it), and the sub-agents it names read in turn."""
        paged = self.hub.setup.paged_store
        params = codex_threads.ThreadReadParams(threadId=child_id, includeTurns=not paged)
        try:
            read = yield Ask("thread/read", params, codex_threads.ThreadReadResult)
        except Refused as refused:
            log.info("history of sub-agent %s unavailable: %s", child_id, refused)
            tree.stored[child_id] = None
            return
        stored = tree.stored[child_id] = read.thread
        if not paged:
            items = tree.items[child_id] = history.stored_items(stored)
            yield from self._visit(root, tree, child_id, items)
        elif not self.hub.subagents_exposed:
            yield Later(partial(self._read_shown, child_id, tree))
            yield from self._visit(root, tree, child_id, tree.items[child_id])
        # Paged, with the capability: its history and its sub-agents when it is restored.

    def _read_shown(self, thread_id: str, tree: _Tree, done: Callable[[object], None]) -> None:
        """A hidden sub-agent's history, paged: only the items its root shows of it (those a
        permission request introduces there, and its spawns) are kept, in ``tree``."""
        kept: list[ThreadItem] = tree.items.setdefault(thread_id, [])
        HistoryPages(self.hub, thread_id, partial(_keep_shown, kept), done).start()

    # -- replaying them ---------------------------------------------------------------------------

    def _with_hidden(self, first: history.ItemReplay, tree: _Tree) -> history.ItemReplay:
        """``first``, followed at each spawn by what the live root showed of the hidden
        sub-agents it made (:meth:`_hidden_updates`)."""

        def replay(item: ThreadItem) -> list[msgspec.Struct] | None:
            out = first(item)
            if isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent":
                out = list(out or [])
                for child_id in item.receiverThreadIds:
                    out += self._hidden_updates(child_id, tree, set())
            return out

        return replay

    def _hidden_updates(self, thread_id: str, tree: _Tree, seen: set[str]) -> list[msgspec.Struct]:
        """A hidden sub-agent's tool calls as its root showed them live: those a permission
        request can introduce there (:meth:`Approvals._introduce`), with the name the request
        said (``ask_target``); its own sub-agents' after the spawn that made each."""
        stored = tree.stored.get(thread_id)
        if stored is None or thread_id in seen:
            return []
        seen.add(thread_id)
        agent = stored.agentNickname or "a sub-agent"
        out: list[msgspec.Struct] = []
        for item in tree.items.get(thread_id, []):
            if isinstance(item, _ASKING_ITEMS):
                for update in tool_views.history_updates(item, cwd=stored.cwd):
                    if isinstance(update, acp_tools.ToolCall):
                        update = msgspec.structs.replace(update, title=f"{agent}: {update.title}")
                    out.append(update)
            elif (
                isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent"
            ):
                for child_id in item.receiverThreadIds:
                    out += self._hidden_updates(child_id, tree, seen)
        return out

    def _restored(self, root: ThreadRecord, tree: _Tree) -> Exchange:
        """Each sub-agent read: its association, then its history, then its own sub-agents'.
        With the store paged, each history comes a page at a time, the sub-agents a page
        spawned read before it is replayed."""
        paged = self.hub.setup.paged_store
        pending = [(root.id, c) for c in reversed(tree.spawned.get(root.id, []))]
        while pending:
            parent_id, child_id = pending.pop()
            if child_id not in tree.stored:
                continue  # a session already when the load began: nothing to replay
            stored = tree.stored[child_id]
            child = self._adopt(parent_id, child_id, stored)
            if child is None:
                continue
            root.replayed.append(child)
            if stored is not None and paged:
                last = yield Later(partial(self._replay_child_pages, root, parent_id, child, tree))
                _running_child(child, last)
            elif stored is not None:
                items = tree.items.get(child_id, [])
                self._replay_child(parent_id, child, items, tree.nicknames())
                _running_child(child, stored.turns[-1] if stored.turns else None)
            # Its own sub-agents next, in the order it spawned them.
            pending.extend((child.id, c) for c in reversed(tree.spawned.get(child.id, [])))

    def _replay_child_pages(
        self,
        root: ThreadRecord,
        parent_id: str,
        child: ThreadRecord,
        tree: _Tree,
        done: Callable[[codex_types.Turn | None], None],
    ) -> None:
        """A sub-agent's history a page at a time, the sub-agents each page spawned read
        (their nicknames title its collab calls) before it is replayed; then ``done`` with
        its last turn."""
        page = partial(self._child_page, root, tree, parent_id, child)
        HistoryPages(self.hub, child.id, page, done, last_turn=True).start()

    def _child_page(
        self,
        root: ThreadRecord,
        tree: _Tree,
        parent_id: str,
        child: ThreadRecord,
        items: list[ThreadItem],
        replayed: Callable[[], None],
    ) -> None:
        replay = self._page_replayed(root, tree, child.id, items, replayed, (parent_id, child))
        exchanges.start(self.hub, replay)

    def _adopt(
        self, parent_id: str, child_id: str, stored: codex_types.Thread | None
    ) -> ThreadRecord | None:
        """A sub-agent the load read becomes a session: its association, and a notice when
        its thread could not be read."""
        threads = self.hub.threads
        parent = threads.session(parent_id)
        if threads.session(child_id) is not None or parent is None:
            return None
        nickname = stored.agentNickname if stored else None
        role = stored.agentRole if stored else None
        self.hub.client.update(parent_id, acp_subagents.announcement(child_id, nickname, role))
        child = threads.add_child(
            child_id,
            parent,
            nickname=nickname,
            role=role,
            cwd=stored.cwd if stored else "",
            visible=True,
        )
        self._subagents.session_added(child)
        if stored is None:
            sessions = self.hub.handshake.client_capabilities.session or {}
            if sessions.get("notices") is not None:
                self.hub.client.update(
                    parent_id,
                    acp_types.Notice(
                        severity="warning",
                        title=f"The history of sub-agent {nickname or child_id} is not available",
                        description="Codex could not read its thread; its association is shown without it.",
                    ),
                )
        return child

    def _replay_child(
        self,
        parent_id: str,
        child: ThreadRecord,
        items: list[ThreadItem],
        nicknames: history.Nicknames,
    ) -> None:
        updates = history.replay_updates(
            child.id,
            items,
            first=self._subagents.history_item(child.id, nicknames),
            cwd=child.cwd,
            phases=self.hub.handshake.air is not None,
            terminals=self.hub.client.face.version == 2,
        )
        for update in _as_incoming(updates, parent_id, child.id):
            self.hub.client.update(child.id, update)

    def traffic_released(self, root: ThreadRecord) -> None:
        """What Codex said of a paged load's thread while its history went out, handled in
        order now that the answer went (nothing, for any other open)."""
        threads = self.hub.threads
        if not threads.is_held(root):
            return
        threads.release_traffic(root)
        self._subagents.session_added(root)

    def after_response(self, root: ThreadRecord) -> None:
        """Current snapshots of the children a load replayed, now that history is over."""
        replayed, root.replayed = root.replayed, []
        for child in replayed:
            self._subagents.report(child)


#: The items whose tool call a permission request introduces on the session it is asked on.
_ASKING_ITEMS = (
    codex_items.CommandExecutionItem,
    codex_items.FileChangeItem,
    codex_items.McpToolCallItem,
)


def _running(root: ThreadRecord, stored_ids: set[str]) -> Steps[list[msgspec.Struct]]:
    """The commands a thread this Codex already held still runs (a shared Codex: another
    client left them running, or they outlived their turn): Codex stores a command only once
    it ends, so the history lacks them. Each is replayed in progress (the live session showed
    it so) and its later ``item/completed`` updates it. ``stored_ids``: the tool items the
    history holds."""
    params = codex_threads.BackgroundTerminalsListParams(threadId=root.id)
    try:
        listed = yield Ask(
            "thread/backgroundTerminals/list", params, codex_threads.BackgroundTerminalsListResult
        )
    except Refused as refused:
        # An older or newer Codex without the experimental method: they show once done.
        log.info("running commands of %s not listed: %s", root.id, refused)
        root.running_at_load = []  # nor would they be when asked again
        return []
    root.running_at_load = listed.data
    running: list[msgspec.Struct] = []
    for terminal in listed.data:
        if terminal.itemId in stored_ids or terminal.itemId in root.tools.announced:
            continue
        root.tools.announce(terminal.itemId)
        running.append(tool_views.running_command(terminal, root.cwd))
    return running


def _keep_shown(
    kept: list[ThreadItem], items: list[ThreadItem], replayed: Callable[[], None]
) -> None:
    """A page of a hidden sub-agent's history: the items its root shows of it kept."""
    kept.extend(item for item in items if isinstance(item, _ASKING_ITEMS) or _is_spawn(item))
    replayed()


def _tool_ids(items: list[ThreadItem]) -> set[str]:
    return {item.id for item in items if isinstance(item, codex_items.ToolItem)}


def _last_turn(root: ThreadRecord, turn: codex_types.Turn) -> None:
    """The last turn listed so far: when another client's turn runs on the thread (its
    status ``active`` at the resume), the one in progress is that turn."""
    if root.turn is not None and root.turn.kind is TurnKind.FOREIGN:
        turns.found(root, root.turn, turn.id if turn.status == "inProgress" else None)


def _running_child(child: ThreadRecord, last: codex_types.Turn | None) -> None:
    """A sub-agent whose last stored turn is in progress runs it (or ran it when its Codex
    stopped)."""
    if last is not None and last.status == "inProgress":
        turns.subagent_running(child, last.id)


def _is_spawn(item: ThreadItem) -> bool:
    return isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent"


def _spawned(items: list[ThreadItem]) -> list[str]:
    """The sub-agents a stored thread's items spawned, in order."""
    found: list[str] = []
    for item in items:
        if isinstance(item, codex_items.CollabAgentToolCallItem) and item.tool == "spawnAgent":
            found += [t for t in item.receiverThreadIds if t not in found]
    return found


def _named(items: list[ThreadItem]) -> list[str]:
    """Every thread a stored thread's collab items name, in order."""
    found: list[str] = []
    for item in items:
        if isinstance(item, codex_items.CollabAgentToolCallItem):
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
