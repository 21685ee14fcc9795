"""Sub-agent sessions in the engine alone: Codex's events in, ACP messages out (no processes).

Codex 0.169's orderings are reproduced here message by message (CODEX-NOTES, "Sub-agents";
the recordings in ``fixtures/`` show them too): no ``thread/started`` for a child, the child's
first events (its status, even its turn and its permission request) before the parent's spawn
item names it, nested children whose parent the bridge does not know yet. Each test checks the
whole conversation with the RFD transcript checker and the unstable ACP schema as well
(:meth:`Tree.check`).

Tests marked ``xfail(strict=True)`` show bugs: their reason says the input, what was expected
and what happened.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.acp.sessions import ListSessionsResult
from bridge.acp.types import NewSessionResult
from tests.support.engine_harness import (
    Harness,
    answer_codex_until_answered,
    check_interleaved,
    request_log,
)
from tests.support.scenarios.subagents import mentions, restricted_calls

ROOT = "thread-root"
ROOT_TURN = "turn-root"
CHILD = "thread-child"
GRANDCHILD = "thread-grandchild"
CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
RESTRICTED = [
    *restricted_calls("/work", "hi"),
    ("_session/steering", {"prompt": [{"type": "text", "text": "hi"}]}),
]


def collab(
    item_id: str,
    tool: str,
    sender: str,
    receivers: list[str],
    *,
    status: str = "completed",
    prompt: str | None = None,
    states: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``collabAgentToolCall`` item, as Codex 0.169 sends it."""
    return {
        "type": "collabAgentToolCall",
        "id": item_id,
        "tool": tool,
        "status": status,
        "senderThreadId": sender,
        "receiverThreadIds": receivers,
        "prompt": prompt,
        "model": "mock-model",
        "reasoningEffort": "medium",
        "agentsStates": states or {},
    }


def running_child(turn_id: str) -> dict[str, Any]:
    """The child as Codex stores it while its turn ``turn_id`` runs."""
    return {
        "id": CHILD,
        "parentThreadId": ROOT,
        "status": {"type": "active", "activeFlags": []},
        "turns": [{"id": turn_id, "status": "inProgress", "items": []}],
    }


class Tree:
    """A root session with a running prompt, and helpers to play a sub-agent's Codex events."""

    def __init__(self, *, subagents: bool = True, version: int = 1) -> None:
        """``version`` 2: an ACP v2 client (sub-agents need no capability there)."""
        self.h = Harness()
        self.client_requests: list[tuple[int, dict[str, Any]]] = []
        self.version = version
        if version == 2:
            self.request(
                "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "1"}}
            )
        else:
            capabilities = dict(CAPABILITIES, subagents={}) if subagents else dict(CAPABILITIES)
            self.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        self.subagents = subagents
        rid = self.request("session/new", {"cwd": "/work", "mcpServers": []})
        start = self.h.codex_request("thread/start")
        self.h.codex_reply(start["id"], {"thread": {"id": ROOT, "cwd": "/work"}, "model": "mock"})
        assert self.h.result(rid, NewSessionResult).sessionId == ROOT
        self.prompt = self.request(
            "session/prompt", {"sessionId": ROOT, "prompt": [{"type": "text", "text": "go"}]}
        )
        turn = self.h.codex_request("turn/start")
        self.h.codex_reply(
            turn["id"], {"turn": {"id": ROOT_TURN, "status": "inProgress", "items": []}}
        )
        self.turns: dict[str, str] = {}
        self.turn_started(ROOT, ROOT_TURN, ROOT_TURN)

    def request(self, method: str, params: Any) -> int:
        """A client request (kept, so :meth:`check` can follow its answer)."""
        at = len(self.h.to_client)
        rid = self.h.client_request(method, params)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.client_requests.append((at, message))
        return rid

    # -- Codex's side -------------------------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.h.codex_notify(method, params)

    def status(self, thread: str, kind: str = "idle", flags: list[str] | None = None) -> None:
        status: dict[str, Any] = {"type": kind}
        if kind == "active":
            status["activeFlags"] = flags or []
        self.notify("thread/status/changed", {"threadId": thread, "status": status})

    def reads(self) -> list[dict[str, Any]]:
        return [m for m in self.h.to_codex if m.get("method") == "thread/read"]

    def codex_back(self) -> None:
        """Codex, lost while it could be restarted, is back: its handshake and its resumes of
        the threads the bridge held are answered."""
        self.h._collect(self.h.engine.codex_restarted())
        self.h.codex_reply(self.h.codex_request("initialize")["id"], {})
        for m in [m for m in self.h.to_codex if m.get("method") == "thread/resume"]:
            self.h.codex_reply(m["id"], {"thread": {"id": m["params"]["threadId"]}})

    def read_of(self, thread: str) -> dict[str, Any]:
        found = [m for m in self.reads() if m["params"]["threadId"] == thread]
        assert found, f"the bridge never read {thread} (reads: {self.reads()})"
        return found[-1]

    def answer_read(
        self, thread: str, parent: str | None, nickname: str | None = None, role: str | None = None
    ) -> None:
        source: Any = "vscode"
        if parent is not None:
            spawn = {"parent_thread_id": parent, "depth": 1, "agent_nickname": nickname}
            source = {"subAgent": {"thread_spawn": spawn}}
        stored = {
            "id": thread,
            "cwd": "/work",
            "parentThreadId": parent,
            "agentNickname": nickname,
            "agentRole": role,
            "source": source,
            "status": {"type": "idle"},
            "turns": [],
        }
        self.h.codex_reply(self.read_of(thread)["id"], {"thread": stored})

    def fail_read(self, thread: str) -> None:
        self.h.codex_error(self.read_of(thread)["id"], f"thread not loaded: {thread}")

    def spawn_started(self, item_id: str, sender: str = ROOT, prompt: str = "@@ words 2") -> None:
        item = collab(item_id, "spawnAgent", sender, [], status="inProgress", prompt=prompt)
        self.notify(
            "item/started", {"threadId": sender, "turnId": self.turns[sender], "item": item}
        )

    def collab_completed(
        self,
        item_id: str,
        tool: str,
        child: str,
        sender: str = ROOT,
        prompt: str | None = "@@ words 2",
        state: dict[str, Any] | None = None,
    ) -> None:
        states = {child: state or {"status": "pendingInit", "message": None}}
        item = collab(item_id, tool, sender, [child], prompt=prompt, states=states)
        self.notify(
            "item/completed", {"threadId": sender, "turnId": self.turns[sender], "item": item}
        )

    def collab_started(self, item_id: str, tool: str, child: str, sender: str = ROOT) -> None:
        item = collab(item_id, tool, sender, [child], status="inProgress")
        self.notify(
            "item/started", {"threadId": sender, "turnId": self.turns[sender], "item": item}
        )

    def turn_started(self, thread: str, turn: str, root_turn: str = ROOT_TURN) -> None:
        self.turns[thread] = turn
        body = {"id": turn, "rootTurnId": root_turn, "items": [], "status": "inProgress"}
        self.notify("turn/started", {"threadId": thread, "turn": body})

    def turn_completed(
        self, thread: str, turn: str, status: str = "completed", error: Any = None
    ) -> None:
        body: dict[str, Any] = {"id": turn, "items": [], "status": status, "error": error}
        self.notify("turn/completed", {"threadId": thread, "turn": body})

    def user_message(self, thread: str, text: str, item_id: str) -> None:
        item = {"type": "userMessage", "id": item_id, "content": [{"type": "text", "text": text}]}
        self.notify(
            "item/completed", {"threadId": thread, "turnId": self.turns[thread], "item": item}
        )

    def agent_text(self, thread: str, text: str, item_id: str = "msg-1") -> None:
        self.notify(
            "item/agentMessage/delta",
            {"threadId": thread, "turnId": self.turns[thread], "itemId": item_id, "delta": text},
        )

    def second_assignment(self) -> None:
        """The parent waits for the child's first result, then sends it a second assignment,
        which the child runs to its end."""
        done = {"status": "completed", "message": "first result"}
        self.collab_started("wait-1", "wait", CHILD)
        self.collab_completed("wait-1", "wait", CHILD, prompt=None, state=done)
        self.collab_started("send-1", "sendInput", CHILD)
        self.collab_completed("send-1", "sendInput", CHILD, prompt="again", state=done)
        self.status(CHILD, "active")
        self.turn_started(CHILD, "turn-child-2")
        self.user_message(CHILD, "again", "user-2")
        self.status(CHILD)
        self.turn_completed(CHILD, "turn-child-2")

    def child_waits_on_approval(self, rid: int) -> None:
        """The child, spawned, waits on a command approval Codex asks (request ``rid``)."""
        self.spawn()
        self.status(CHILD, "active", ["waitingOnApproval"])
        self.approval(CHILD, rid=rid)

    def approval(self, thread: str, rid: int = 0, item_id: str = "call_cmd") -> None:
        """Codex asks the client to approve a command of ``thread``'s current turn."""
        params = {
            "threadId": thread,
            "turnId": self.turns[thread],
            "itemId": item_id,
            "reason": "needs it",
            "command": "/bin/bash -lc 'touch x'",
            "cwd": "/work",
            "commandActions": [{"type": "unknown", "command": "touch x"}],
            "availableDecisions": ["accept", "cancel"],
        }
        message = {"id": rid, "method": "item/commandExecution/requestApproval", "params": params}
        self.h._collect(self.h.engine.receive_codex(msgspec.json.encode(message)))

    def spawned_unread(self) -> None:
        """The spawn item ``spawn-1`` starts, the child is idle, the item completes: the
        bridge's read of the child is not answered yet."""
        self.spawn_started("spawn-1")
        self.status(CHILD)
        self.collab_completed("spawn-1", "spawnAgent", CHILD)

    def spawn(
        self,
        child: str = CHILD,
        nickname: str = "Ada",
        sender: str = ROOT,
        turn: str = "turn-child",
        role: str | None = None,
    ) -> None:
        """Codex's usual order: the spawn item starts, the child is idle (the bridge reads it),
        the spawn item completes, the read is answered, the child's turn starts."""
        self.spawn_started(f"spawn-{child}", sender)
        self.status(child)
        self.collab_completed(f"spawn-{child}", "spawnAgent", child, sender)
        self.answer_read(child, sender, nickname, role)
        self.status(child, "active")
        self.turn_started(child, turn, self.turns.get(sender, ROOT_TURN))

    # -- the client's side ----------------------------------------------------------------------

    def answer(self, request: dict[str, Any], option: str | None) -> None:
        outcome = (
            {"outcome": "cancelled"}
            if option is None
            else {"outcome": "selected", "optionId": option}
        )
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}}
        at = len(self.h.to_client)
        self.h.client_raw(msgspec.json.encode(reply))
        self.client_requests.append((at, reply))

    def cancel(self, session: str) -> None:
        self.h.client_notify("session/cancel", {"sessionId": session})

    # -- what the client saw ----------------------------------------------------------------------

    def sent(self) -> list[dict[str, Any]]:
        return self.h.to_client

    def permission_requests(self) -> list[dict[str, Any]]:
        return [m for m in self.sent() if m.get("method") == "session/request_permission"]

    def updates(self, kind: str, session: str | None = None) -> list[dict[str, Any]]:
        return [u for u in self.h.updates(session) if u["sessionUpdate"] == kind]

    def announcements(self) -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        for m in self.sent():
            if m.get("method") != "session/update":
                continue
            update = m["params"]["update"]
            if update["sessionUpdate"] == "subagent_update" and update["sessionId"] not in {
                c for _, c in seen
            }:
                seen.append((m["params"]["sessionId"], update["sessionId"]))
        return seen

    def subagent_updates(self, child: str) -> list[dict[str, Any]]:
        return [u for u in self.updates("subagent_update") if u["sessionId"] == child]

    def states(self, child: str) -> list[dict[str, Any]]:
        return [u["state"] for u in self.subagent_updates(child) if u.get("state") is not None]

    def capabilities(self, child: str) -> Any:
        """The last ``capabilities`` the parent's stream carried for ``child`` (``...``: none)."""
        found: Any = ...
        for update in self.subagent_updates(child):
            if "capabilities" in update:
                found = update["capabilities"]
        return found

    def first_mention(self, session: str) -> int:
        """Index of the first message to the client that bears ``session`` in any role."""
        for n, m in enumerate(self.sent()):
            if mentions(m, session):
                return n
        raise AssertionError(f"{session} never reached the client")

    def interrupts(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.h.to_codex if m.get("method") == "turn/interrupt"]

    def answers_to_codex(self, rid: int) -> list[dict[str, Any]]:
        return [m for m in self.h.to_codex if m.get("id") == rid and "method" not in m]

    def check(self) -> None:
        """The whole conversation: valid against the unstable schema, and the RFD checker passes."""
        # The client's requests and answers, in their places among what the agent sent.
        check_interleaved(
            self.sent(),
            list(self.client_requests),
            version=self.version,
            unstable=True,
            subagents=self.subagents,
        )


def session_messages(t: Tree, session: str) -> list[dict[str, Any]]:
    return t.updates("session_message", session)


# -- announcement before traffic --------------------------------------------------------------------


def test_child_events_before_the_spawn_item_completes_are_held_until_the_child_is_announced() -> (
    None
):
    t = Tree()
    t.spawn_started("spawn-1")
    before = len(t.sent())
    # Codex's order: the child's status and turn come before the spawn item names it.
    t.status(CHILD)
    assert t.read_of(CHILD)["params"] == {"threadId": CHILD}, "the bridge asks whose child it is"
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.user_message(CHILD, "@@ words 2", "user-child")
    t.agent_text(CHILD, "word1 ")
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    assert len(t.sent()) == before, "nothing about the child before its parent is known"

    t.answer_read(CHILD, ROOT, "Ada", "explorer")
    assert t.announcements() == [(ROOT, CHILD)]
    first = t.first_mention(CHILD)
    announcement = t.sent()[first]["params"]
    assert announcement["sessionId"] == ROOT
    assert announcement["update"] == {
        "sessionUpdate": "subagent_update",
        "sessionId": CHILD,
        "title": "Ada",
        "description": "explorer",
    }
    # The held traffic follows, in order, on the child's own stream.
    assert t.updates("agent_message_chunk", CHILD)[0]["content"]["text"] == "word1 "
    [incoming] = session_messages(t, CHILD)
    assert incoming["senderSessionId"] == ROOT and incoming["recipientSessionId"] == CHILD
    assert incoming["content"] == [{"type": "text", "text": "@@ words 2"}]
    [outgoing] = session_messages(t, ROOT)
    assert outgoing["senderSessionId"] == ROOT and outgoing["recipientSessionId"] == CHILD
    assert not t.updates("tool_call", ROOT), "the spawn is a message, not also a tool call"
    assert t.states(CHILD)[-1] == {"state": "running"}
    assert t.capabilities(CHILD) == {"cancel": {}}
    t.check()


def test_a_child_permission_request_before_its_announcement_is_held_then_asked_on_the_child() -> (
    None
):
    """RFD validation scenario "Deliver a child permission callback before spawn metadata"."""
    t = Tree()
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.status(CHILD, "active", ["waitingOnApproval"])
    t.approval(CHILD, rid=7)
    assert not t.permission_requests(), "held: the child is not announced yet"
    assert not t.answers_to_codex(7), "held, not answered on the client's behalf"
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    assert not t.permission_requests()

    t.answer_read(CHILD, ROOT, "Ada")
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == CHILD
    assert t.first_mention(CHILD) < t.sent().index(request)
    assert t.states(CHILD)[-1] == {"state": "requires_action"}
    t.answer(request, "allow_once")
    assert t.answers_to_codex(7)[0]["result"] == {"decision": "accept"}
    t.status(CHILD, "active")
    assert t.states(CHILD)[-1] == {"state": "running"}
    t.check()


def test_requires_action_while_the_childs_request_is_open_and_running_once_answered() -> None:
    t = Tree()
    t.child_waits_on_approval(3)
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == CHILD
    assert t.states(CHILD)[-1] == {"state": "requires_action"}
    t.answer(request, "allow_once")
    t.notify("serverRequest/resolved", {"threadId": CHILD, "requestId": 3})
    t.status(CHILD, "active")
    assert t.states(CHILD)[-1] == {"state": "running"}
    # Identical snapshots are not repeated.
    t.status(CHILD, "active")
    t.status(CHILD, "active")
    assert [s["state"] for s in t.states(CHILD)].count("running") == 2  # before and after
    t.check()


def test_a_nested_child_seen_first_is_announced_on_its_parents_stream_after_its_parent() -> None:
    t = Tree()
    # The grandchild's events reach the bridge before anything of its parent.
    t.status(GRANDCHILD)
    t.answer_read(GRANDCHILD, CHILD, "Grace")
    assert t.read_of(CHILD), "its parent is read too: ancestors are announced first"
    assert not t.announcements()
    t.answer_read(CHILD, ROOT, "Ada")
    assert t.announcements() == [(ROOT, CHILD), (CHILD, GRANDCHILD)]
    assert all(parent != ROOT for parent, child in t.announcements() if child == GRANDCHILD)
    t.check()


def test_a_nested_spawn_in_codexs_usual_order() -> None:
    t = Tree()
    t.spawn(CHILD, "Ada")
    t.spawn(GRANDCHILD, "Grace", sender=CHILD, turn="turn-grandchild")
    assert t.announcements() == [(ROOT, CHILD), (CHILD, GRANDCHILD)]
    [to_grandchild] = session_messages(t, CHILD)
    assert to_grandchild["senderSessionId"] == CHILD
    assert to_grandchild["recipientSessionId"] == GRANDCHILD
    assert t.states(GRANDCHILD)[-1] == {"state": "running"}
    # Every association update of the grandchild is on its parent's stream, never the root's.
    streams = {
        m["params"]["sessionId"]
        for m in t.sent()
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "subagent_update"
        and m["params"]["update"]["sessionId"] == GRANDCHILD
    }
    assert streams == {CHILD}
    t.check()


def test_a_child_whose_parentage_cannot_be_read_stays_unexposed_and_asks_on_its_root() -> None:
    t = Tree()
    t.status(CHILD)
    t.turn_started(CHILD, "turn-child", root_turn=ROOT_TURN)
    t.approval(CHILD, rid=5)
    t.fail_read(CHILD)
    assert not t.announcements(), "never guess a parent"
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == ROOT, "represented on its root session"
    assert "sub-agent" in request["params"]["toolCall"]["title"]
    t.check()


def test_a_thread_that_is_no_child_here_is_never_shown_and_its_question_left_to_its_owner() -> None:
    """Another client's thread on a shared app-server: Codex sends its events and questions to
    every connection; the client that owns the thread answers, this bridge must not pre-empt it."""
    t = Tree()
    other = "thread-of-another-client"
    t.status(other, "active")
    t.turns[other] = "turn-other"
    t.approval(other, rid=9)
    t.answer_read(other, None)
    t.agent_text(other, "not for this client")
    assert other not in str(t.sent())
    assert not t.permission_requests()
    assert not t.answers_to_codex(9)
    assert len(t.reads()) == 1, "read once, then left alone"
    t.check()


# -- messages and reuse ---------------------------------------------------------------------------


def test_two_assignments_to_the_same_child_keep_its_session_with_distinct_message_ids() -> None:
    """RFD validation scenario "Send two assignments to the same child conversation"."""
    t = Tree()
    t.spawn()
    t.user_message(CHILD, "@@ words 2", "user-1")
    t.status(CHILD)
    t.turn_completed(CHILD, "turn-child")
    t.second_assignment()

    assert t.announcements() == [(ROOT, CHILD)], "one association, reused"
    outgoing = [m for m in session_messages(t, ROOT) if m["senderSessionId"] == ROOT]
    incoming_root = [m for m in session_messages(t, ROOT) if m["senderSessionId"] == CHILD]
    incoming_child = session_messages(t, CHILD)
    assert [m["content"][0]["text"] for m in outgoing] == ["@@ words 2", "again"]
    assert [m["content"][0]["text"] for m in incoming_child] == ["@@ words 2", "again"]
    assert [m["content"][0]["text"] for m in incoming_root] == ["first result"]
    ids = [m["messageId"] for m in session_messages(t, ROOT)]
    assert len(ids) == len(set(ids))
    assert len({m["messageId"] for m in incoming_child}) == 2
    states = [s["state"] for s in t.states(CHILD)]
    assert states[-4:] == ["running", "idle", "running", "idle"]
    assert t.states(CHILD)[-1] == {"state": "idle", "stopReason": "end_turn"}
    # wait stays an ordinary tool call of the parent.
    [wait] = t.updates("tool_call", ROOT)
    assert wait["toolCallId"] == "wait-1" and "Ada" in wait["title"]
    t.check()


def test_a_wait_result_that_arrives_before_the_childs_announcement_is_not_lost() -> None:
    t = Tree()
    t.spawned_unread()
    t.collab_started("wait-1", "wait", CHILD)
    done = {"status": "completed", "message": "result"}
    t.collab_completed("wait-1", "wait", CHILD, prompt=None, state=done)
    t.answer_read(CHILD, ROOT, "Ada")
    incoming = [m for m in session_messages(t, ROOT) if m["senderSessionId"] == CHILD]
    assert [m["content"] for m in incoming] == [[{"type": "text", "text": "result"}]]
    t.check()


# -- work state --------------------------------------------------------------------------------------


RUNNING = {"state": "running"}
ENDED = {"state": "idle", "stopReason": "end_turn"}
#: When Codex answers the bridge's read of a new child, among the child's first events (the
#: fixtures spawn_and_wait and send_input_reuse show the first two).
READ_ANSWERED = ["before it is active", "after its turn started", "after its turn ended"]


def first_assignment(t: Tree, read_answered: str) -> None:
    """A spawn in Codex's order (the child is created idle, then its turn starts), the bridge's
    read of the child answered at ``read_answered``; the child's first turn ends."""
    t.spawned_unread()
    events = [
        lambda: t.status(CHILD, "active"),
        lambda: t.turn_started(CHILD, "turn-child"),
        lambda: t.user_message(CHILD, "@@ words 2", "user-1"),
        lambda: t.agent_text(CHILD, "word1 "),
        lambda: t.status(CHILD),
        lambda: t.turn_completed(CHILD, "turn-child"),
    ]
    at = {READ_ANSWERED[0]: 0, READ_ANSWERED[1]: 2, READ_ANSWERED[2]: len(events)}[read_answered]
    for event in events[:at]:
        event()
    t.answer_read(CHILD, ROOT, "Ada")
    for event in events[at:]:
        event()


@pytest.mark.parametrize("read_answered", READ_ANSWERED)
def test_a_spawned_child_is_running_first_and_idle_only_once_its_turn_ended(
    read_answered: str,
) -> None:
    """Codex creates a child idle and starts its turn a moment later: that idle is no work
    that ended, so the client sees running, then idle, never a child done before it began."""
    t = Tree()
    first_assignment(t, read_answered)
    assert t.states(CHILD) == [RUNNING, ENDED]
    t.check()


def test_a_new_child_has_no_state_until_codex_shows_it_at_work() -> None:
    t = Tree()
    t.spawned_unread()
    t.answer_read(CHILD, ROOT, "Ada")
    assert t.announcements() == [(ROOT, CHILD)]
    assert t.states(CHILD) == [], "announced, with no confirmed work state yet (RFD)"
    t.status(CHILD, "active")
    assert t.states(CHILD) == [RUNNING]
    t.turn_started(CHILD, "turn-child")
    assert t.states(CHILD) == [RUNNING]
    assert t.capabilities(CHILD) == {"cancel": {}}
    t.check()


@pytest.mark.parametrize("read_answered", READ_ANSWERED)
def test_a_reused_child_reads_running_idle_running_idle(read_answered: str) -> None:
    """send_input to a child that finished its first assignment: each assignment is one
    running then one idle, with no idle before the first running."""
    t = Tree()
    first_assignment(t, read_answered)
    t.second_assignment()
    assert t.states(CHILD) == [RUNNING, ENDED, RUNNING, ENDED]
    t.check()


def test_a_failed_child_turn_is_idle_with_the_error_and_no_stop_reason() -> None:
    t = Tree()
    t.spawn()
    t.status(CHILD, "systemError")
    error = {"message": "stream disconnected before completion", "codexErrorInfo": "other"}
    t.turn_completed(CHILD, "turn-child", "failed", error)
    last = t.states(CHILD)[-1]
    assert last["state"] == "idle" and last.get("stopReason") is None
    assert "stream disconnected" in last["_meta"]["error"]
    assert t.capabilities(CHILD) in ({}, {"cancel": None}), "nothing left to cancel"
    # The parent's own prompt is untouched.
    assert t.h.client_response(t.prompt) is None
    t.turn_completed(ROOT, ROOT_TURN)
    assert t.h.result(t.prompt) == {"stopReason": "end_turn"}
    t.check()


def test_losing_codex_makes_running_children_unknown() -> None:
    t = Tree()
    t.spawn()
    t.h._collect(t.h.engine.codex_lost("Codex app-server exited"))
    assert t.states(CHILD)[-1] == {"state": "unknown"}
    assert t.capabilities(CHILD) in ({}, {"cancel": None})
    t.check()


# -- cancellation --------------------------------------------------------------------------------------


def test_cancelling_a_child_interrupts_its_turn_only_and_idles_it_when_codex_confirms() -> None:
    t = Tree()
    t.spawn()
    assert t.capabilities(CHILD) == {"cancel": {}}
    t.cancel(CHILD)
    assert t.interrupts() == [{"threadId": CHILD, "turnId": "turn-child"}]
    t.h.codex_reply([m for m in t.h.to_codex if m.get("method") == "turn/interrupt"][-1]["id"], {})
    assert t.states(CHILD)[-1] == {"state": "running"}, "an acknowledgement is not a cancellation"
    t.status(CHILD)
    t.turn_completed(CHILD, "turn-child", "interrupted")
    assert t.states(CHILD)[-1] == {"state": "idle", "stopReason": "cancelled"}
    assert t.capabilities(CHILD) in ({}, {"cancel": None})
    # The parent's turn goes on.
    assert t.h.client_response(t.prompt) is None
    t.cancel(CHILD)
    assert len(t.interrupts()) == 1, "nothing left to interrupt"
    t.check()


def test_cancelling_the_parent_interrupts_every_active_descendant() -> None:
    t = Tree()
    t.spawn(CHILD, "Ada")
    t.spawn(GRANDCHILD, "Grace", sender=CHILD, turn="turn-grandchild")
    t.cancel(ROOT)
    assert sorted(i["threadId"] for i in t.interrupts()) == sorted([ROOT, CHILD, GRANDCHILD])
    for thread, turn in [(ROOT, ROOT_TURN), (CHILD, "turn-child"), (GRANDCHILD, "turn-grandchild")]:
        t.turn_completed(thread, turn, "interrupted")
    assert t.h.result(t.prompt) == {"stopReason": "cancelled"}
    assert t.states(CHILD)[-1] == {"state": "idle", "stopReason": "cancelled"}
    assert t.states(GRANDCHILD)[-1] == {"state": "idle", "stopReason": "cancelled"}
    t.check()


def test_cancelling_the_parent_answers_a_childs_pending_request_cancel_exactly_once() -> None:
    t = Tree()
    t.child_waits_on_approval(4)
    [request] = t.permission_requests()
    t.cancel(ROOT)
    assert [a["result"] for a in t.answers_to_codex(4)] == [{"decision": "cancel"}]
    t.answer(request, "allow_once")  # too late: authorizes nothing
    assert [a["result"] for a in t.answers_to_codex(4)] == [{"decision": "cancel"}]
    t.check()


def test_cancelling_a_child_with_an_open_request_answers_it_cancel_and_ignores_a_late_allow() -> (
    None
):
    t = Tree()
    t.child_waits_on_approval(4)
    [request] = t.permission_requests()
    t.cancel(CHILD)
    assert [a["result"] for a in t.answers_to_codex(4)] == [{"decision": "cancel"}]
    t.answer(request, "allow_once")
    assert len(t.answers_to_codex(4)) == 1
    t.check()


def test_a_request_of_a_child_turn_being_cancelled_authorizes_nothing() -> None:
    t = Tree()
    t.spawn()
    t.cancel(CHILD)
    t.approval(CHILD, rid=6)
    for request in t.permission_requests():
        t.answer(request, "allow_once")
    assert [a["result"] for a in t.answers_to_codex(6)] == [{"decision": "cancel"}]


def test_cancelling_the_parent_reaches_a_child_whose_turn_starts_after_the_cancel() -> None:
    t = Tree()
    t.spawned_unread()
    t.answer_read(CHILD, ROOT, "Ada")
    t.cancel(ROOT)
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child", root_turn=ROOT_TURN)
    assert {"threadId": CHILD, "turnId": "turn-child"} in t.interrupts()


def test_cancelling_the_parent_reaches_a_child_still_being_identified() -> None:
    t = Tree()
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child", root_turn=ROOT_TURN)
    t.cancel(ROOT)
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    t.answer_read(CHILD, ROOT, "Ada")
    assert {"threadId": CHILD, "turnId": "turn-child"} in t.interrupts()


def test_closing_the_parent_cancels_its_childrens_work() -> None:
    t = Tree()
    t.child_waits_on_approval(8)
    t.request("session/close", {"sessionId": ROOT})
    assert {"threadId": CHILD, "turnId": "turn-child"} in t.interrupts()
    assert [a["result"] for a in t.answers_to_codex(8)] == [{"decision": "cancel"}]


# -- restricted sessions -------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "params"), RESTRICTED, ids=[m for m, _ in RESTRICTED])
def test_a_client_method_that_changes_a_child_is_refused_clearly(method: str, params: Any) -> None:
    t = Tree()
    t.spawn()
    sent = len(t.h.to_codex)
    rid = t.request(method, {"sessionId": CHILD, **params})
    error = t.h.error(rid)
    assert error.code == -32602
    assert method in error.message and CHILD in error.message
    assert "subagent" in error.message
    assert len(t.h.to_codex) == sent, "nothing reaches Codex"
    t.check()


def test_session_list_shows_no_child() -> None:
    t = Tree()
    rid = t.request("session/list", {})
    listing = t.h.codex_request("thread/list")
    child_source = {"subAgent": {"thread_spawn": {"parent_thread_id": ROOT, "depth": 1}}}
    t.h.codex_reply(
        listing["id"],
        {
            "data": [
                {"id": ROOT, "cwd": "/work", "preview": "go", "source": "vscode"},
                {"id": CHILD, "cwd": "/work", "parentThreadId": ROOT, "source": child_source},
                {"id": GRANDCHILD, "cwd": "/work", "source": child_source},
            ],
            "nextCursor": None,
        },
    )
    sessions = t.h.result(rid, ListSessionsResult).sessions
    assert [s.sessionId for s in sessions] == [ROOT]


# -- a client without the capability ------------------------------------------------------------------


def test_without_the_capability_children_stay_hidden_and_ask_on_the_root_naming_the_agent() -> None:
    t = Tree(subagents=False)
    t.spawned_unread()
    t.answer_read(CHILD, ROOT, "Ada")
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.user_message(CHILD, "@@ words 2", "user-child")
    t.agent_text(CHILD, "hidden words")
    t.status(CHILD, "active", ["waitingOnApproval"])
    t.approval(CHILD, rid=2)
    kinds = {u["sessionUpdate"] for u in t.h.updates()}
    assert not kinds & {"subagent_update", "session_message", "session_message_chunk"}
    assert CHILD not in {m["params"]["sessionId"] for m in t.sent() if "params" in m}
    # The spawn is an ordinary tool call on the root.
    [spawn] = [u for u in t.updates("tool_call", ROOT) if u["toolCallId"] == "spawn-1"]
    assert spawn["status"] == "in_progress"
    # The child's question is asked on the root, saying which agent asks; nothing blocks.
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == ROOT
    assert request["params"]["toolCall"]["title"].startswith("Ada")
    # The root was never shown the child's command: it is told of it first (rule 5 of the
    # transcript checker); the command's own item says how it ended, not the answer.
    tool_call_id = request["params"]["toolCall"]["toolCallId"]
    [introduced] = [u for u in t.updates("tool_call", ROOT) if u["toolCallId"] == tool_call_id]
    assert introduced["title"] == request["params"]["toolCall"]["title"]
    assert introduced["status"] == "pending"
    t.answer(request, "allow_once")
    assert t.answers_to_codex(2)[0]["result"] == {"decision": "accept"}
    assert not [u for u in t.updates("tool_call_update", ROOT) if u["toolCallId"] == tool_call_id]
    command = {
        "type": "commandExecution",
        "id": tool_call_id,
        "command": "/bin/bash -lc 'touch x'",
        "cwd": "/work",
        "status": "completed",
        "commandActions": [],
        "exitCode": 0,
        "aggregatedOutput": "",
    }
    t.notify("item/completed", {"threadId": CHILD, "turnId": "turn-child", "item": command})
    closing = [u for u in t.updates("tool_call_update", ROOT) if u["toolCallId"] == tool_call_id]
    assert [(u["status"], u["title"]) for u in closing] == [("completed", "Ada: touch x")]
    t.check()


def test_without_the_capability_a_childs_question_held_before_its_parent_is_known_still_asked() -> (
    None
):
    t = Tree(subagents=False)
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.approval(CHILD, rid=1)
    assert not t.permission_requests()
    t.answer_read(CHILD, ROOT, "Ada")
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == ROOT
    t.check()


# -- when a thread/read fails -----------------------------------------------------------------------


def test_a_failed_first_read_of_a_child_loses_none_of_its_traffic() -> None:
    t = Tree()
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.fail_read(CHILD)
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.approval(CHILD, rid=12)
    t.answer_read(CHILD, ROOT, "Ada")
    assert t.announcements() == [(ROOT, CHILD)]
    assert [r["params"]["sessionId"] for r in t.permission_requests()] == [CHILD]
    assert t.capabilities(CHILD) == {"cancel": {}}


def test_a_spawn_naming_a_child_whose_read_failed_sends_its_message_once_after_announcing_it() -> (
    None
):
    """Regression: the spawn item placed the child (its read had failed, the item alone names
    its parent) before the spawn's message was queued for after the announcement: the
    message was never sent."""
    t = Tree()
    t.spawn_started("spawn-1")
    t.status(CHILD)
    t.fail_read(CHILD)
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    assert t.announcements() == [(ROOT, CHILD)]
    [spawn] = session_messages(t, ROOT)
    assert spawn["messageId"] == "spawn-1"
    assert (spawn["senderSessionId"], spawn["recipientSessionId"]) == (ROOT, CHILD)
    assert spawn["content"] == [{"type": "text", "text": "@@ words 2"}]
    announced = t.first_mention(CHILD)
    assert t.sent()[announced]["params"]["update"]["sessionUpdate"] == "subagent_update"
    assert len([r for r in t.reads() if r["params"]["threadId"] == CHILD]) == 2, (
        "placed: read once more, for its nickname only"
    )
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    t.user_message(CHILD, "@@ words 2", "user-child")
    assert len(session_messages(t, ROOT)) == 1, "sent once"
    assert t.states(CHILD)[-1] == {"state": "running"}
    t.check()


def test_a_nested_child_whose_parent_cannot_be_read_is_represented_on_its_root() -> None:
    t = Tree()
    t.status(GRANDCHILD)
    t.status(GRANDCHILD, "active")
    t.turn_started(GRANDCHILD, "turn-grandchild", root_turn=ROOT_TURN)
    t.approval(GRANDCHILD, rid=11)
    t.answer_read(GRANDCHILD, CHILD, "Grace")
    t.fail_read(CHILD)
    assert not t.announcements(), "never guess a parent"
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == ROOT


# -- a cancel never reaches later work --------------------------------------------------------------


def test_cancelling_the_parent_while_a_child_is_idle_leaves_its_next_assignment_alone() -> None:
    """RFD: cancellation does not prevent the parent from assigning later work to the child,
    and a cancellation racing with already-ended work does not rewrite it."""
    t = Tree()
    t.spawn()
    t.status(CHILD)
    t.turn_completed(CHILD, "turn-child")
    t.cancel(ROOT)  # the child is idle: nothing of it to stop
    t.turn_completed(ROOT, ROOT_TURN, "interrupted")
    assert t.h.result(t.prompt) == {"stopReason": "cancelled"}
    t.request("session/prompt", {"sessionId": ROOT, "prompt": [{"type": "text", "text": "more"}]})
    start = t.h.codex_request("turn/start")
    t.h.codex_reply(
        start["id"], {"turn": {"id": "turn-root-2", "status": "inProgress", "items": []}}
    )
    t.turn_started(ROOT, "turn-root-2", "turn-root-2")
    t.collab_started("send-1", "sendInput", CHILD)
    t.collab_completed("send-1", "sendInput", CHILD, prompt="more")
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child-2", "turn-root-2")
    assert [i for i in t.interrupts() if i["threadId"] == CHILD] == []
    t.approval(CHILD, rid=21)
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == CHILD
    assert not t.answers_to_codex(21), "asked, not answered cancel on the client's behalf"
    t.check()


def test_a_cancel_that_arrives_after_the_childs_turn_ended_does_not_stop_its_next_turn() -> None:
    """The client's session/cancel crossed the child's turn/completed (and the capability's
    withdrawal) on the wire: it must not carry over to the next assignment."""
    t = Tree()
    t.spawn()
    t.status(CHILD)
    t.turn_completed(CHILD, "turn-child")
    t.cancel(CHILD)
    t.collab_started("send-1", "sendInput", CHILD)
    t.collab_completed("send-1", "sendInput", CHILD, prompt="more")
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child-2")
    assert t.interrupts() == []
    assert t.states(CHILD)[-1] == {"state": "running"}
    t.check()


# -- a closed root forgets its sub-agents ----------------------------------------------------------


def close_root(t: Tree) -> int:
    """``session/close`` of the root while its prompt runs: cancelled, then unsubscribed."""
    rid = t.request("session/close", {"sessionId": ROOT})
    t.turn_completed(ROOT, ROOT_TURN, status="interrupted")
    unsubscribe = t.h.codex_request("thread/unsubscribe")
    t.h.codex_reply(unsubscribe["id"], {"status": "unsubscribed"})
    assert t.h.client_response(rid) == {"jsonrpc": "2.0", "id": rid, "result": {}}
    return len(t.sent())


@pytest.mark.parametrize("subagents", [True, False], ids=["shown", "hidden"])
def test_a_closed_roots_child_asks_nothing_on_the_closed_session(subagents: bool) -> None:
    """Regression: a hidden child of a closed root asked its question on the root's id."""
    t = Tree(subagents=subagents)
    t.spawn()
    closed_at = close_root(t)
    assert CHILD not in t.h.engine.threads and ROOT not in t.h.engine.threads
    # Codex goes on for the child: its events, then a question.
    t.status(CHILD, "active")
    t.agent_text(CHILD, "still here")
    t.approval(CHILD, rid=9)
    after = t.sent()[closed_at:]
    assert after == [], after  # nothing names the closed root or its child
    # Codex is answered once, never left waiting on a question nobody sees.
    [answer] = t.answers_to_codex(9)
    assert answer["result"]["decision"] in ("decline", "cancel")
    t.check()


def test_a_grandchild_of_a_closed_root_first_seen_after_the_close_is_declined_not_held() -> None:
    t = Tree()
    t.spawn()
    closed_at = close_root(t)
    t.status(GRANDCHILD, "active")
    t.turns[GRANDCHILD] = "turn-gc"
    t.approval(GRANDCHILD, rid=11)
    t.answer_read(GRANDCHILD, CHILD, "Grace")  # its parent is the closed root's child
    assert t.sent()[closed_at:] == []
    [answer] = t.answers_to_codex(11)
    assert answer["result"]["decision"] in ("decline", "cancel")


def test_a_child_identified_only_after_its_root_closed_has_its_running_turn_stopped() -> None:
    t = Tree()
    # The child's turn starts before anything names its parent; the root closes meanwhile.
    t.status(CHILD, "active")
    t.turn_started(CHILD, "turn-child")
    closed_at = close_root(t)
    t.approval(CHILD, rid=13)
    t.answer_read(CHILD, ROOT, "Ada")
    assert {"threadId": CHILD, "turnId": "turn-child"} in t.interrupts()
    [answer] = t.answers_to_codex(13)
    assert answer["result"]["decision"] in ("decline", "cancel")
    assert t.sent()[closed_at:] == []


def test_a_turn_a_closed_roots_child_starts_later_is_stopped() -> None:
    t = Tree()
    t.spawn()
    t.turn_completed(CHILD, "turn-child")  # idle when the root closes: nothing to interrupt
    closed_at = close_root(t)
    assert {"threadId": CHILD, "turnId": "turn-child-2"} not in t.interrupts()
    t.turn_started(CHILD, "turn-child-2")
    assert {"threadId": CHILD, "turnId": "turn-child-2"} in t.interrupts()
    assert t.sent()[closed_at:] == []


def test_the_sub_agents_of_a_closed_root_whose_reopening_fails_are_declined_not_dropped() -> None:
    """Regression (the gap test_engine_robustness found): a load of the closed root is in
    flight (its thread/read races the reads of its sub-agents); a child, and a grandchild
    under it, ask meanwhile; the child's read names the closed root, which waits for the load.
    The load's read is refused: the root was taken for another client's thread, its waiting
    children too, so what they asked, then and later, was never answered."""
    t = Tree()
    closed_at = close_root(t)
    load = t.request("session/load", {"sessionId": ROOT, "cwd": "/work", "mcpServers": []})
    load_read = t.read_of(ROOT)
    t.turns[CHILD], t.turns[GRANDCHILD] = "turn-child", "turn-grandchild"
    t.approval(GRANDCHILD, rid=31)
    t.answer_read(GRANDCHILD, CHILD, "Grace")
    t.approval(CHILD, rid=32)
    t.answer_read(CHILD, ROOT, "Ada")  # the closed root, being loaded: waits for the load
    t.h.codex_error(load_read["id"], "thread not found")
    assert t.h.error(load).code == -32002
    t.approval(CHILD, rid=33)
    t.approval(GRANDCHILD, rid=34)
    for rid in (31, 32, 33, 34):
        [answer] = t.answers_to_codex(rid)
        assert answer["result"]["decision"] in ("decline", "cancel"), rid
    t.turn_started(CHILD, "turn-child-2")
    assert {"threadId": CHILD, "turnId": "turn-child-2"} in t.interrupts(), "still a sub-agent"
    names = str(t.sent()[closed_at:])
    assert CHILD not in names and GRANDCHILD not in names
    t.check()


# -- Codex lost and brought back ------------------------------------------------------------------


def test_a_child_unknown_after_codex_was_lost_gets_a_fresh_state_once_codex_is_back() -> None:
    t = Tree()
    t.spawn()
    t.h._collect(t.h.engine.codex_lost("Codex app-server exited", retrying=True))
    assert t.states(CHILD)[-1] == {"state": "unknown"}
    t.codex_back()
    resumed = [m["params"]["threadId"] for m in t.h.to_codex if m.get("method") == "thread/resume"]
    assert resumed == [ROOT, CHILD]
    read = t.read_of(CHILD)
    assert read["params"] == {"threadId": CHILD, "includeTurns": True}
    t.h.codex_reply(read["id"], {"thread": running_child("turn-child")})
    assert t.states(CHILD)[-1] == {"state": "running"}  # fresh, replacing unknown
    assert t.capabilities(CHILD) == {"cancel": {}}
    # The child is the same session: its next event reaches its own stream.
    t.agent_text(CHILD, "back again")
    assert t.updates("agent_message_chunk", CHILD)[-1]["content"]["text"] == "back again"
    t.check()


# -- the same item, live and replayed -------------------------------------------------------------

WORKDIR = "/work"
DONE = {"status": "completed", "message": "done"}


def final_calls(updates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool call as the client ends up seeing it: its ``tool_call`` with every later
    ``tool_call_update`` applied."""
    calls: dict[str, dict[str, Any]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            call = calls.setdefault(update["toolCallId"], {})
            call.update({k: v for k, v in update.items() if k != "sessionUpdate"})
    return calls


def shown_as(call: dict[str, Any]) -> dict[str, Any]:
    return {k: call.get(k) for k in ("title", "kind", "status", "content")}


def stored(thread: str, items: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": thread,
        "cwd": WORKDIR,
        "status": {"type": "notLoaded"},
        "source": "vscode",
        "turns": [{"id": f"turn-of-{thread}", "status": "completed", "items": items}],
        **fields,
    }


def load_tree(
    threads: dict[str, dict[str, Any]], *, subagents: bool = True
) -> tuple[Harness, list[tuple[int, dict[str, Any]]]]:
    """``session/load`` of ``ROOT``, every ``thread/read`` answered from ``threads`` (id →
    stored thread), until the load's response."""
    h = Harness()
    capabilities = dict(CAPABILITIES, subagents={}) if subagents else dict(CAPABILITIES)
    requests, request = request_log(h)

    request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    rid = request("session/load", {"sessionId": ROOT, "cwd": WORKDIR, "mcpServers": []})

    def reply(m: dict[str, Any]) -> Any:
        thread = threads[m["params"]["threadId"]]
        if m["method"] == "thread/resume":
            return {"thread": {**thread, "turns": []}, "model": "mock"}
        return {"thread": thread}

    answer_codex_until_answered(h, rid, reply, asks=("thread/read", "thread/resume"))
    assert "result" in h.client_response(rid)  # type: ignore[operator]
    return h, requests


def check_loaded(h: Harness, requests: list[tuple[int, dict[str, Any]]], subagents: bool) -> None:
    check_interleaved(h.to_client, requests, unstable=subagents, subagents=subagents)


def live_collab_call(tool: str, *, subagents: bool) -> tuple[dict[str, Any], list[Any]]:
    """A root spawns Ada (Codex's usual order), then makes one ``tool`` call naming her; the
    call as the client ends up seeing it, and the root's stored items."""
    t = Tree(subagents=subagents)
    t.spawn()
    prompt = "more" if tool == "sendInput" else None
    state = {"status": "pendingInit", "message": None} if tool == "spawnAgent" else DONE
    item_id = f"{tool}-1"
    if tool == "spawnAgent":  # a second spawn, of a child Codex names Bea
        t.spawn_started(item_id)
        t.status("thread-bea")
        t.collab_completed(item_id, tool, "thread-bea", prompt="again", state=state)
        t.answer_read("thread-bea", ROOT, "Bea")
        made = collab(
            item_id, tool, ROOT, ["thread-bea"], prompt="again", states={"thread-bea": state}
        )
    else:
        t.collab_started(item_id, tool, CHILD)
        t.collab_completed(item_id, tool, CHILD, prompt=prompt, state=state)
        made = collab(item_id, tool, ROOT, [CHILD], prompt=prompt, states={CHILD: state})
    t.check()
    spawn = collab(
        f"spawn-{CHILD}",
        "spawnAgent",
        ROOT,
        [CHILD],
        prompt="@@ words 2",
        states={CHILD: {"status": "pendingInit", "message": None}},
    )
    return final_calls(t.h.updates(ROOT))[item_id], [spawn, made]


def replayed_tree(root_items: list[Any], *, subagents: bool) -> tuple[Harness, dict[str, Any]]:
    threads = {
        ROOT: stored(ROOT, root_items),
        CHILD: stored(CHILD, [], parentThreadId=ROOT, agentNickname="Ada"),
        "thread-bea": stored("thread-bea", [], parentThreadId=ROOT, agentNickname="Bea"),
    }
    h, requests = load_tree(threads, subagents=subagents)
    check_loaded(h, requests, subagents)
    return h, final_calls(h.updates(ROOT))


@pytest.mark.parametrize(
    ("tool", "subagents"),
    [
        ("wait", True),
        ("closeAgent", True),
        ("resumeAgent", True),
        # Without the capability, spawns and messages are tool calls too.
        ("spawnAgent", False),
        ("sendInput", False),
        ("wait", False),
        ("closeAgent", False),
        ("resumeAgent", False),
    ],
)
def test_a_collab_call_has_the_same_title_and_kind_live_and_replayed(
    tool: str, subagents: bool
) -> None:
    live, root_items = live_collab_call(tool, subagents=subagents)
    assert "sub-agent" not in live["title"], live["title"]
    _h, replayed = replayed_tree(root_items, subagents=subagents)
    assert shown_as(replayed[root_items[-1]["id"]]) == shown_as(live)


def test_a_collab_call_in_a_childs_history_names_the_grandchild_as_live() -> None:
    """The child's own history replays after every sub-agent was read: its wait names its
    sub-agent as the live call did."""
    t = Tree()
    t.spawn(CHILD, "Ada")
    t.spawn(GRANDCHILD, "Grace", sender=CHILD, turn="turn-grandchild")
    t.collab_started("wait-g", "wait", GRANDCHILD, sender=CHILD)
    t.collab_completed("wait-g", "wait", GRANDCHILD, sender=CHILD, prompt=None, state=DONE)
    t.check()
    live = final_calls(t.h.updates(CHILD))["wait-g"]
    assert live["title"] == "Wait for Grace"

    pending = {"status": "pendingInit", "message": None}
    threads = {
        ROOT: stored(
            ROOT,
            [
                collab(
                    f"spawn-{CHILD}",
                    "spawnAgent",
                    ROOT,
                    [CHILD],
                    prompt="go",
                    states={CHILD: pending},
                )
            ],
        ),
        CHILD: stored(
            CHILD,
            [
                collab(
                    "spawn-g",
                    "spawnAgent",
                    CHILD,
                    [GRANDCHILD],
                    prompt="go",
                    states={GRANDCHILD: pending},
                ),
                collab("wait-g", "wait", CHILD, [GRANDCHILD], states={GRANDCHILD: DONE}),
            ],
            parentThreadId=ROOT,
            agentNickname="Ada",
        ),
        GRANDCHILD: stored(GRANDCHILD, [], parentThreadId=CHILD, agentNickname="Grace"),
    }
    h, requests = load_tree(threads)
    check_loaded(h, requests, True)
    assert shown_as(final_calls(h.updates(CHILD))["wait-g"]) == shown_as(live)


def test_a_call_naming_a_child_not_yet_placed_is_retitled_once_it_is() -> None:
    """Live, a call can name a child whose thread is still being read (no nickname yet): it is
    retitled when the child is placed, so it ends as a replay shows it."""
    t = Tree(subagents=False)
    t.spawned_unread()
    assert final_calls(t.h.updates(ROOT))["spawn-1"]["title"] == "Spawn sub-agent"
    t.answer_read(CHILD, ROOT, "Ada")
    call = final_calls(t.h.updates(ROOT))["spawn-1"]
    assert call["title"] == "Spawn Ada"
    assert call["content"][0]["content"]["text"].endswith("Ada: pendingInit")
    t.check()


def test_a_call_naming_a_child_codex_has_not_shown_yet_is_retitled_once_it_is_placed() -> None:
    """A busy Codex can complete the spawn before any of the child's own traffic: the call
    names a thread the bridge has never seen, and is still retitled once it is placed."""
    t = Tree(subagents=False)
    t.spawn_started("spawn-1")
    t.collab_completed("spawn-1", "spawnAgent", CHILD)
    assert final_calls(t.h.updates(ROOT))["spawn-1"]["title"] == "Spawn sub-agent"
    t.status(CHILD)
    t.answer_read(CHILD, ROOT, "Ada")
    assert final_calls(t.h.updates(ROOT))["spawn-1"]["title"] == "Spawn Ada"
    t.check()


FILE_CHANGE = {
    "type": "fileChange",
    "id": "patch-1",
    "status": "completed",
    "changes": [
        {
            "path": f"{WORKDIR}/src/a.py",
            "kind": {"type": "update", "move_path": None},
            "diff": "@@ -1 +1 @@\n-a\n+b\n",
        }
    ],
}
COMMAND = {
    "type": "commandExecution",
    "id": "cmd-1",
    "command": "/bin/bash -lc 'cat src/a.py'",
    "cwd": WORKDIR,
    "status": "completed",
    "commandActions": [
        {"type": "read", "command": "cat src/a.py", "name": "a.py", "path": "src/a.py"}
    ],
    "aggregatedOutput": "b\n",
    "exitCode": 0,
}
IMAGE = {"type": "imageView", "id": "image-1", "path": f"{WORKDIR}/shot.png"}


def live_tool_call(item: dict[str, Any], thread: str) -> dict[str, Any]:
    t = Tree()
    if thread == CHILD:
        t.spawn()
    started = {**item, "status": "inProgress"} if "status" in item else item
    t.notify("item/started", {"threadId": thread, "turnId": t.turns[thread], "item": started})
    t.notify("item/completed", {"threadId": thread, "turnId": t.turns[thread], "item": item})
    t.check()
    return final_calls(t.h.updates(thread))[item["id"]]


def replayed_tool_call(item: dict[str, Any], thread: str) -> dict[str, Any]:
    pending = {"status": "pendingInit", "message": None}
    spawn = collab(
        f"spawn-{CHILD}", "spawnAgent", ROOT, [CHILD], prompt="go", states={CHILD: pending}
    )
    threads = {
        ROOT: stored(ROOT, [spawn] + ([item] if thread == ROOT else [])),
        CHILD: stored(
            CHILD, [item] if thread == CHILD else [], parentThreadId=ROOT, agentNickname="Ada"
        ),
    }
    h, requests = load_tree(threads)
    check_loaded(h, requests, True)
    return final_calls(h.updates(thread))[item["id"]]


@pytest.mark.parametrize(
    ("item", "thread"),
    [
        # A command's title is the command itself; a change's and an image's shorten the
        # path by the session's cwd.
        pytest.param(COMMAND, ROOT, id="root-commandExecution"),
        pytest.param(FILE_CHANGE, ROOT, id="root-fileChange"),
        pytest.param(IMAGE, ROOT, id="root-imageView"),
        pytest.param(COMMAND, CHILD, id="child-commandExecution"),
        pytest.param(FILE_CHANGE, CHILD, id="child-fileChange"),
        pytest.param(IMAGE, CHILD, id="child-imageView"),
    ],
)
def test_a_tool_item_has_the_same_title_and_kind_live_and_replayed(
    item: dict[str, Any], thread: str
) -> None:
    live = live_tool_call(item, thread)
    replayed = replayed_tool_call(item, thread)
    assert (replayed["title"], replayed["kind"]) == (live["title"], live["kind"])
