"""A root reopened on a Codex that still holds its sub-agents: the engine subscribes to them.

Codex sends a thread's events only to the connections subscribed to it; the sub-agents a
previous connection spawned stay loaded in a long-lived Codex, subscribed to that connection
alone. After ``session/resume`` or ``session/load`` of such a root, and before answering it,
the engine asks Codex what it holds (``thread/loaded/list``) and what lies under the root
(``thread/list {ancestorThreadId}``), and resumes each loaded sub-agent: the child's later
traffic then reaches the client, announced once (engine alone, Codex mocked).
"""

from __future__ import annotations

from typing import Any

import pytest

from bridge.codex.threads import SUBAGENT_SOURCE_KINDS
from tests.support.engine_harness import Harness, check_interleaved, request_log
from tests.test_subagents import stored

ROOT = "thread-root"
CHILD = "thread-child"
GRANDCHILD = "thread-grandchild"
OTHER = "thread-other"
WORKDIR = "/work"
CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
SPAWN = {
    "type": "collabAgentToolCall",
    "id": "spawn-1",
    "tool": "spawnAgent",
    "status": "completed",
    "senderThreadId": ROOT,
    "receiverThreadIds": [CHILD],
    "prompt": "@@ say one",
    "model": "mock-model",
    "reasoningEffort": "medium",
    "agentsStates": {CHILD: {"status": "completed", "message": "one"}},
}


def _thread(thread_id: str, items: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A thread Codex has loaded (idle), one completed turn of ``items``."""
    return stored(thread_id, items, status={"type": "idle"}, **fields)


def _child(thread_id: str, parent: str, nickname: str) -> dict[str, Any]:
    items = [
        {"type": "userMessage", "id": "u-1", "content": [{"type": "text", "text": "@@ say one"}]},
        {"type": "agentMessage", "id": "m-1", "text": "one"},
    ]
    spawn = {"parent_thread_id": parent, "depth": 1, "agent_nickname": nickname}
    return _thread(
        thread_id,
        items,
        parentThreadId=parent,
        agentNickname=nickname,
        source={"subAgent": {"thread_spawn": spawn}},
    )


THREADS = {
    ROOT: _thread(ROOT, [SPAWN]),
    CHILD: _child(CHILD, ROOT, "Ada"),
    GRANDCHILD: _child(GRANDCHILD, CHILD, "Grace"),
}


class Reopened:
    """A client reopening ``ROOT`` (``method``) on a Codex that holds it (``root_status``)."""

    def __init__(self, method: str, *, root_status: str = "idle") -> None:
        self.h = Harness()
        self.requests, self.request = request_log(self.h)
        self.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": dict(CAPABILITIES, subagents={})},
        )
        self.threads = {**THREADS, ROOT: {**THREADS[ROOT], "status": {"type": root_status}}}
        self.start = len(self.h.to_codex)
        self.rid = self.request(method, {"sessionId": ROOT, "cwd": WORKDIR, "mcpServers": []})
        self.answered: set[int] = set()

    def asked(self) -> list[dict[str, Any]]:
        """The requests the engine sent Codex since the open, not answered yet."""
        return [
            m
            for m in self.h.to_codex[self.start :]
            if "id" in m and "method" in m and m["id"] not in self.answered
        ]

    def pending(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.asked() if m["method"] == method]

    def answer(self, message: dict[str, Any], result: Any) -> None:
        self.answered.add(message["id"])
        self.h.codex_reply(message["id"], result)

    def open_until(self, method: str | None) -> None:
        """Answer Codex's reads and resumes of the open (and what a load replays) until the
        engine asks ``method`` (``None``: until the open is answered)."""
        while self.response() is None if method is None else not self.pending(method):
            asked = self.asked()
            assert asked, f"the open waits on nothing but {method} (sent: {self.h.to_codex})"
            for m in asked:
                self.answer(m, self.result(m))

    def result(self, m: dict[str, Any]) -> Any:
        method, params = m["method"], m["params"]
        if method == "thread/read":
            return {"thread": self.threads[params["threadId"]]}
        if method == "thread/resume":
            thread = {**self.threads[params["threadId"]], "turns": []}
            return {"thread": thread, "model": "mock"}
        if method == "thread/backgroundTerminals/list":
            return {"data": []}
        raise AssertionError(f"the open asked Codex {method}: {m}")

    def response(self) -> dict[str, Any] | None:
        return self.h.client_response(self.rid)

    def resumes(self) -> list[str]:
        return [
            m["params"]["threadId"] for m in self.h.to_codex if m.get("method") == "thread/resume"
        ]

    def announcements(self, child: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.h.to_client
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            and m["params"]["update"]["sessionId"] == child
            and "title" in m["params"]["update"]
        ]

    def child_works(self, thread: str, text: str) -> None:
        """Codex gives ``thread`` new work (``send_input``): its status, turn, user message
        and answer, as a subscribed connection receives them."""
        status = {"type": "active", "activeFlags": []}
        self.h.codex_notify("thread/status/changed", {"threadId": thread, "status": status})
        turn = {"id": "turn-2", "rootTurnId": "turn-root-2", "items": [], "status": "inProgress"}
        self.h.codex_notify("turn/started", {"threadId": thread, "turn": turn})
        for read in self.pending("thread/read"):  # its parentage, when not replayed
            self.answer(read, {"thread": {**self.threads[read["params"]["threadId"]], "turns": []}})
        message = {"type": "userMessage", "id": "u-2", "content": [{"type": "text", "text": text}]}
        self.h.codex_notify(
            "item/completed", {"threadId": thread, "turnId": "turn-2", "item": message}
        )
        self.h.codex_notify(
            "item/agentMessage/delta",
            {"threadId": thread, "turnId": "turn-2", "itemId": "m-2", "delta": "second"},
        )
        done = {"id": "turn-2", "items": [], "status": "completed"}
        self.h.codex_notify("turn/completed", {"threadId": thread, "turn": done})

    def check(self) -> None:
        check_interleaved(self.h.to_client, self.requests, unstable=True, subagents=True)


@pytest.mark.parametrize("method", ["session/resume", "session/load"])
def test_a_reopened_roots_loaded_sub_agent_is_subscribed_to_before_the_answer(
    method: str,
) -> None:
    r = Reopened(method)
    r.open_until("thread/loaded/list")
    assert r.response() is None
    [loaded] = r.pending("thread/loaded/list")
    r.answer(loaded, {"data": [OTHER, ROOT, CHILD], "nextCursor": None})
    # Another client's thread, and a sub-agent of the root Codex no longer holds, are left alone.
    [listed] = r.pending("thread/list")
    assert listed["params"]["ancestorThreadId"] == ROOT
    assert set(listed["params"]["sourceKinds"]) == set(SUBAGENT_SOURCE_KINDS)
    r.answer(listed, {"data": [THREADS[CHILD], THREADS[GRANDCHILD]], "nextCursor": None})
    [subscribe] = r.pending("thread/resume")
    assert subscribe["params"] == {"threadId": CHILD, "excludeTurns": True}
    assert r.response() is None, "answered before the sub-agent was subscribed to"
    r.answer(subscribe, {"thread": {**THREADS[CHILD], "turns": []}, "model": "mock"})
    assert r.response() is not None and "result" in r.response()  # type: ignore[operator]
    assert r.resumes() == [ROOT, CHILD]
    answered = len(r.h.to_client)

    r.child_works(CHILD, "@@ say second")
    # Announced once (by the load's replay, or before its live traffic), on the root's stream.
    [announced] = r.announcements(CHILD)
    assert announced["params"]["sessionId"] == ROOT
    live = [
        m["params"]["update"]
        for m in r.h.to_client[answered:]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == CHILD
    ]
    incoming = [u for u in live if u["sessionUpdate"] == "session_message"]
    assert [(u["senderSessionId"], u["recipientSessionId"]) for u in incoming] == [(ROOT, CHILD)]
    assert incoming[0]["content"] == [{"type": "text", "text": "@@ say second"}]
    said = [u["content"]["text"] for u in live if u["sessionUpdate"] == "agent_message_chunk"]
    assert said == ["second"]
    # A load replays the child's history once, before the answer; a resume replays none.
    history = [
        m["params"]["update"]["content"]["text"]
        for m in r.h.to_client[:answered]
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == CHILD
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert history == (["one"] if method == "session/load" else [])
    r.check()


def test_a_root_codex_did_not_hold_asks_for_no_sub_agent() -> None:
    """Codex loads a sub-agent of a root it did not hold when the root gives it work, for
    the connections subscribed to the root: nothing to subscribe to."""
    r = Reopened("session/resume", root_status="notLoaded")
    r.open_until(None)
    assert r.response() is not None and "result" in r.response()  # type: ignore[operator]
    assert "thread/loaded/list" not in [m.get("method") for m in r.h.to_codex]
    assert r.resumes() == [ROOT]
    r.check()


@pytest.mark.parametrize("refused", ["thread/loaded/list", "thread/list", "thread/resume"])
def test_a_refused_subscription_opens_the_root_all_the_same(refused: str) -> None:
    r = Reopened("session/resume")
    r.open_until("thread/loaded/list")
    results: dict[str, Any] = {
        "thread/loaded/list": {"data": [ROOT, CHILD]},
        "thread/list": {"data": [THREADS[CHILD]]},
    }
    for method in ("thread/loaded/list", "thread/list", "thread/resume"):
        [asked] = r.pending(method)
        if method == refused:
            r.answered.add(asked["id"])
            r.h.codex_error(asked["id"], f"{method} refused", code=-32601)
            break
        r.answer(asked, results[method])
    assert r.response() is not None and "result" in r.response()  # type: ignore[operator]
    r.check()


def test_every_page_of_what_codex_holds_and_of_the_roots_sub_agents_is_read() -> None:
    r = Reopened("session/resume")
    r.open_until("thread/loaded/list")
    [first] = r.pending("thread/loaded/list")
    r.answer(first, {"data": [ROOT], "nextCursor": "loaded-2"})
    [second] = r.pending("thread/loaded/list")
    assert second["params"] == {"cursor": "loaded-2"}
    r.answer(second, {"data": [GRANDCHILD, CHILD], "nextCursor": None})
    [page] = r.pending("thread/list")
    r.answer(page, {"data": [THREADS[CHILD]], "nextCursor": "list-2"})
    [page] = r.pending("thread/list")
    assert page["params"]["cursor"] == "list-2"
    assert page["params"]["ancestorThreadId"] == ROOT
    assert r.response() is None
    r.answer(page, {"data": [THREADS[GRANDCHILD]], "nextCursor": None})
    for subscribe in r.pending("thread/resume"):
        r.answer(subscribe, {"thread": {**THREADS[subscribe["params"]["threadId"]], "turns": []}})
    assert r.resumes() == [ROOT, CHILD, GRANDCHILD]
    assert r.response() is not None and "result" in r.response()  # type: ignore[operator]
    r.check()
