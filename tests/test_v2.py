"""ACP v2 (draft) over the same engine: negotiation, the prompt life cycle, work state,
resume with replay, sub-agents, and the methods v2 adds (see bridge/engine/faces/v2.py).

Every message the engine sends a v2 client is checked against the v2 schema."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.acp import v2
from bridge.acp.sessions import ListSessionsResult
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness
from tests.test_lifecycle import CWD, THREAD, resume_result, stored_thread
from tests.test_subagents import (
    CHILD,
    ENDED,
    READ_ANSWERED,
    ROOT,
    RUNNING,
    Tree,
    first_assignment,
)


class V2(Harness):
    """A harness whose client speaks v2 (initialized at once)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        rid = self.client_request(
            "initialize", {"protocolVersion": 2, "info": {"name": "test", "version": "1"}}
        )
        self.init = self.result(rid)

    def new_session(self, thread_id: str = "thread-1", cwd: str = "/work") -> str:
        rid = self.client_request("session/new", {"cwd": cwd})
        start = self.codex_request("thread/start")
        self.codex_reply(start["id"], {"thread": {"id": thread_id, "cwd": cwd}, "model": "mock"})
        response = self.client_response(rid)
        assert response is not None and response["result"]["sessionId"] == thread_id, response
        return thread_id

    def prompt(self, session_id: str, text: str = "hi") -> int:
        return self.client_request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    def accept_turn(self, turn_id: str = "turn-1", thread_id: str = "thread-1") -> None:
        """Codex takes the turn, then shows the prompt as its user message item (whose
        id the prompt's message takes: history replays it under that id)."""
        start = self.codex_request("turn/start")
        self.codex_reply(
            start["id"], {"turn": {"id": turn_id, "status": "inProgress", "items": []}}
        )
        item = {"type": "userMessage", "id": f"um-{turn_id}", "content": []}
        self.codex_notify("item/started", {"threadId": thread_id, "turnId": turn_id, "item": item})

    @classmethod
    def with_turn(cls, **options: Any) -> V2:
        """A v2 client whose session ``thread-1`` has turn ``turn-1`` running."""
        h = cls(**options)
        h.new_session()
        h.prompt("thread-1")
        h.accept_turn()
        return h

    def cancel_call(self, call: str = "call-1", session_id: str = "thread-1") -> int:
        """The client's ``tool_call/cancel`` of ``call``; its request id."""
        return self.client_request(
            "tool_call/cancel", {"sessionId": session_id, "toolCallId": call}
        )

    def codex_ask(self, rid: int, method: str, params: Any) -> None:
        """Codex sends the engine a request."""
        message = {"id": rid, "method": method, "params": params}
        self._collect(self.engine.receive_codex(msgspec.json.encode(message)))

    def states(self, session_id: str) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in u.items() if k != "sessionUpdate"}
            for u in self.updates(session_id)
            if u["sessionUpdate"] == "state_update"
        ]

    def validate(self) -> None:
        """Every message sent to the client is valid ACP v2 for what it answers."""
        validator = ConversationValidator(version=2, unstable=True)
        sent = iter(self.to_client)
        for message in self.sent_by_client:
            validator.client_sent(message)
        for message in sent:
            validator.agent_sent(message)

    @property
    def sent_by_client(self) -> list[dict[str, Any]]:
        return self._client_messages

    def client_raw(self, data: bytes) -> list[dict[str, Any]]:
        if not hasattr(self, "_client_messages"):
            self._client_messages: list[dict[str, Any]] = []
        self._client_messages.append(msgspec.json.decode(data))
        return super().client_raw(data)


# -- negotiation -------------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "answered"), [(1, 1), (2, 2), (3, 2), (65535, 2)])
def test_the_highest_version_at_or_below_the_clients_is_answered(asked: int, answered: int) -> None:
    h = Harness()
    params: dict[str, Any] = {"protocolVersion": asked}
    if asked >= 2:
        params["info"] = {"name": "t", "version": "1"}
    rid = h.client_request("initialize", params)
    assert h.result(rid)["protocolVersion"] == answered


def test_a_version_below_every_supported_one_is_minus_32022_naming_both() -> None:
    h = Harness()
    rid = h.client_request("initialize", {"protocolVersion": 0})
    error = h.error(rid)
    assert error.code == -32022
    assert error.data == {"requested": 0, "supported": [1, 2]}


@pytest.mark.parametrize("version", [-1, 65536, 1.5, "2", None])
def test_a_version_that_is_no_uint16_is_invalid_params(version: Any) -> None:
    h = Harness()
    rid = h.client_request("initialize", {"protocolVersion": version})
    assert h.error(rid).code == -32602


def test_v2_initialize_answers_in_v2_shape_with_what_the_bridge_offers() -> None:
    h = V2()
    result = h.init
    assert result["protocolVersion"] == 2
    assert result["info"]["name"] == "codex-acp-bridge"
    session = result["capabilities"]["session"]
    assert {"status", "title", "archive", "delete", "fork"} <= set(session)
    assert [m["type"] for m in result["authMethods"]] == ["agent", "env_var"]
    h.validate()


def test_initialize_may_be_repeated_only_before_any_other_request() -> None:
    h = V2()
    again = h.client_request(
        "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "1"}}
    )
    assert h.result(again)["protocolVersion"] == 2
    h.new_session()
    late = h.client_request("initialize", {"protocolVersion": 1})
    assert h.error(late).code == -32600
    # The v2 setup stands: a prompt is still answered the v2 way.
    rid = h.prompt("thread-1")
    h.accept_turn()
    assert h.result(rid) == {"messageId": "um-turn-1"}


def test_a_v1_client_sees_no_v2_shapes() -> None:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    h.new_session()
    rid = h.start_prompt("thread-1")
    h.complete_turn("thread-1")
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert not [u for u in h.updates() if u["sessionUpdate"] in ("state_update", "user_message")]


@pytest.mark.parametrize("method", ["session/load", "session/set_mode", "authenticate"])
def test_v1_only_methods_are_not_found_for_a_v2_client(method: str) -> None:
    h = V2()
    rid = h.client_request(method, {"sessionId": "thread-1", "cwd": "/w", "mcpServers": []})
    error = h.error(rid)
    assert error.code == -32601 and method in error.message


# -- the prompt life cycle -------------------------------------------------------------------------


def test_a_prompt_is_answered_at_insertion_and_its_end_is_an_idle_state() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1", "hello")
    assert h.client_response(rid) is None  # not inserted until Codex takes the turn
    h.accept_turn()
    assert h.result(rid) == {"messageId": "um-turn-1"}
    kinds = [u["sessionUpdate"] for u in h.updates("thread-1")]
    assert kinds[-2:] == ["user_message", "state_update"]
    echo = h.updates("thread-1")[-2]
    assert echo == {
        "sessionUpdate": "user_message",
        "messageId": "um-turn-1",
        "content": [{"type": "text", "text": "hello"}],
    }
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": "thread-1", "turnId": "turn-1", "itemId": "m1", "delta": "Hi"},
    )
    h.complete_turn("thread-1")
    assert h.states("thread-1") == [RUNNING, ENDED]
    # One answer only: the turn's end is no second response.
    assert len([m for m in h.to_client if m.get("id") == rid]) == 1
    h.validate()


def test_a_prompt_codex_refuses_before_insertion_is_answered_with_the_error() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1")
    h.codex_error(h.codex_request("turn/start")["id"], "no model")
    error = h.error(rid)
    assert "no model" in error.message
    assert h.states("thread-1") == []
    h.validate()


def test_a_turn_that_fails_after_insertion_ends_idle_with_the_error() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1")
    h.accept_turn()
    h.complete_turn("thread-1", status="failed", error={"message": "model overloaded"})
    assert h.result(rid) == {"messageId": "um-turn-1"}
    last = h.states("thread-1")[-1]
    assert last["state"] == "idle" and last["stopReason"] == "error"
    assert "model overloaded" in last["error"]["message"]
    h.validate()


def test_a_prompt_sent_while_working_is_inserted_when_its_turn_starts() -> None:
    h = V2()
    h.new_session()
    first = h.prompt("thread-1", "one")
    h.accept_turn("turn-1")
    second = h.prompt("thread-1", "two")
    assert h.client_response(second) is None
    h.complete_turn("thread-1", "turn-1")
    h.accept_turn("turn-2")
    assert h.result(second) == {"messageId": "um-turn-2"}
    h.complete_turn("thread-1", "turn-2")
    assert h.result(first) == {"messageId": "um-turn-1"}
    assert h.states("thread-1") == [RUNNING, ENDED, RUNNING, ENDED]
    h.validate()


def test_cancel_ends_the_work_cancelled_and_a_waiting_prompt_is_request_cancelled() -> None:
    h = V2()
    h.new_session()
    h.prompt("thread-1", "one")
    h.accept_turn("turn-1")
    waiting = h.prompt("thread-1", "two")
    h.client_notify("session/cancel", {"sessionId": "thread-1"})
    assert h.error(waiting).code == -32800
    h.codex_reply(h.codex_request("turn/interrupt")["id"], {})
    assert h.states("thread-1")[-1] == RUNNING  # not before Codex says so
    h.complete_turn("thread-1", "turn-1", status="interrupted")
    assert h.states("thread-1")[-1] == {"state": "idle", "stopReason": "cancelled"}
    h.validate()


def _approval_asked(h: V2) -> dict[str, Any]:
    _command_started(h, command="rm -rf build")
    h.codex_ask(
        7,
        "item/commandExecution/requestApproval",
        {
            "threadId": "thread-1",
            "turnId": "turn-1",
            "itemId": "call-1",
            "command": "rm -rf build",
            "cwd": "/work",
        },
    )
    [ask] = [m for m in h.to_client if m.get("method") == "session/request_permission"]
    return ask


def test_a_permission_request_makes_the_session_require_action_until_answered() -> None:
    h = V2.with_turn()
    ask = _approval_asked(h)
    assert ask["params"]["title"] and ask["params"]["subject"]["type"] == "tool_call"
    assert h.states("thread-1")[-1] == {"state": "requires_action"}
    allow = next(o for o in ask["params"]["options"] if o["kind"] == "allow_once")
    h.client_raw(
        msgspec.json.encode(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}},
            }
        )
    )
    assert h.states("thread-1")[-1] == RUNNING
    answer = [m for m in h.to_codex if m.get("id") == 7 and "result" in m]
    assert answer and answer[0]["result"]["decision"] == "accept"
    h.validate()


def test_a_permission_request_taken_back_no_longer_requires_action() -> None:
    """Codex resolved it itself (another window answered): the request is withdrawn and
    the session runs on at once, whether or not the client ever answers the withdrawn
    request; its late answer changes nothing."""
    h = V2.with_turn()
    ask = _approval_asked(h)
    assert h.states("thread-1")[-1] == {"state": "requires_action"}
    h.codex_notify("serverRequest/resolved", {"threadId": "thread-1", "requestId": 7})
    assert [m["params"] for m in h.to_client if m.get("method") == "$/cancel_request"] == [
        {"requestId": ask["id"]}
    ]
    assert h.states("thread-1")[-1] == RUNNING
    told = len(h.states("thread-1"))
    h.client_raw(
        msgspec.json.encode(
            {"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32800, "message": "x"}}
        )
    )
    assert len(h.states("thread-1")) == told
    h.validate()


def test_a_turn_that_ends_while_the_client_holds_its_question_is_idle_once() -> None:
    h = V2.with_turn()
    _approval_asked(h)
    h.complete_turn("thread-1", status="interrupted")
    assert [s["state"] for s in h.states("thread-1")] == ["running", "requires_action", "idle"]
    h.validate()


def test_a_tool_call_is_an_upsert_and_a_plan_a_plan_update() -> None:
    h = V2.with_turn()
    _command_started(h, command="ls")
    h.codex_notify(
        "turn/plan/updated",
        {
            "threadId": "thread-1",
            "turnId": "turn-1",
            "plan": [{"step": "look", "status": "inProgress"}],
        },
    )
    kinds = [u["sessionUpdate"] for u in h.updates("thread-1")]
    assert "tool_call" not in kinds and "plan" not in kinds
    assert "tool_call_update" in kinds and "plan_update" in kinds
    h.validate()


# -- resume ------------------------------------------------------------------------------------------


def _resume(h: V2, replay: bool) -> int:
    params: dict[str, Any] = {"sessionId": THREAD, "cwd": CWD}
    if replay:
        params["replayFrom"] = {"type": "start"}
    rid = h.client_request("session/resume", params)
    turn = [
        {"type": "userMessage", "id": "u0", "content": [{"type": "text", "text": "old"}]},
        {"type": "agentMessage", "id": "a0", "text": "old answer"},
    ]
    read = h.codex_request("thread/read")
    h.codex_reply(read["id"], {"thread": stored_thread([turn])})
    resume = h.codex_request("thread/resume")
    h.codex_reply(resume["id"], resume_result())
    return rid


@pytest.mark.parametrize("replay", [True, False])
def test_resume_replays_only_when_asked_and_sends_the_state_before_its_answer(
    replay: bool,
) -> None:
    h = V2()
    rid = _resume(h, replay)
    response = h.client_response(rid)
    assert response is not None and "result" in response, response
    answered_at = h.to_client.index(response)
    before = [
        m["params"]["update"]
        for m in h.to_client[:answered_at]
        if m.get("method") == "session/update"
    ]
    texts = [u["content"]["text"] for u in before if u["sessionUpdate"].endswith("_chunk")]
    assert texts == (["old", "old answer"] if replay else [])
    assert before[-1] == {"sessionUpdate": "state_update", "state": "idle"}
    h.validate()


def test_an_unknown_replay_cursor_is_invalid_params() -> None:
    h = V2()
    rid = h.client_request(
        "session/resume",
        {"sessionId": THREAD, "cwd": CWD, "replayFrom": {"type": "message", "id": "x"}},
    )
    assert h.error(rid).code == -32602


# -- methods v2 adds ------------------------------------------------------------------------------------


def test_status_of_an_open_session_names_its_state_without_asking_codex() -> None:
    h = V2()
    h.new_session()
    sent = len(h.to_codex)
    rid = h.client_request("session/status", {"sessionId": "thread-1"})
    assert h.result(rid) == {
        "status": "open",
        "state": {"state": "idle"},
    }
    assert len(h.to_codex) == sent
    h.validate()


def status_of_a_saved_then_an_elsewhere_open_session(h: Harness) -> None:
    """``session/status`` of ``THREAD``, each asking Codex's ``thread/read``: ``saved`` while
    Codex has not loaded it, then ``open`` once it has."""
    saved = h.client_request("session/status", {"sessionId": THREAD})
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([])})
    assert h.result(saved) == {"status": "saved"}
    # Open on another connection to the same Codex (a daemon's): in memory, so open.
    elsewhere = h.client_request("session/status", {"sessionId": THREAD})
    h.codex_reply(
        h.codex_request("thread/read")["id"],
        {"thread": stored_thread([], status={"type": "idle"})},
    )
    assert h.result(elsewhere) == {"status": "open"}


def test_status_of_a_saved_session_asks_codex_and_an_unknown_one_is_not_found() -> None:
    h = V2()
    status_of_a_saved_then_an_elsewhere_open_session(h)
    unknown = h.client_request("session/status", {"sessionId": "nope"})
    h.codex_error(h.codex_request("thread/read")["id"], "thread not found: nope")
    assert h.error(unknown).code == -32002
    h.validate()


@pytest.mark.parametrize(
    ("method", "codex_method", "params"),
    [
        ("session/set_title", "thread/name/set", {"title": "Renamed"}),
        ("session/archive", "thread/archive", {}),
        ("session/unarchive", "thread/unarchive", {}),
        ("session/delete", "thread/delete", {}),
    ],
)
def test_thread_management_requests_are_codexs_own(
    method: str, codex_method: str, params: dict[str, Any]
) -> None:
    h = V2()
    h.new_session()
    rid = h.client_request(method, {"sessionId": "thread-1", **params})
    request = h.codex_request(codex_method)
    assert request["params"]["threadId"] == "thread-1"
    if method == "session/set_title":
        assert request["params"]["name"] == "Renamed"
    h.codex_reply(request["id"], {})
    expected = params if method == "session/set_title" else {}
    assert h.result(rid) == expected
    h.validate()


@pytest.mark.parametrize("method", ["tool_call/cancel", "terminal/cancel"])
def test_cancelling_one_tool_call_is_refused_with_the_reason(method: str) -> None:
    h = V2()
    h.new_session()
    params = {"sessionId": "thread-1", "toolCallId": "c", "terminalId": "t"}
    rid = h.client_request(method, params)
    error = h.error(rid)
    assert error.code == -32602 and "session/cancel" in error.message


# -- sub-agents ------------------------------------------------------------------------------------


def _child_states(t: Tree) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in u.items() if k != "sessionUpdate"}
        for u in t.updates("state_update", CHILD)
    ]


def test_a_v2_client_sees_sub_agents_without_declaring_them_with_state_on_both_streams() -> None:
    t = Tree(version=2)
    first_assignment(t, READ_ANSWERED[0])
    assert t.announcements() == [(ROOT, CHILD)]
    # The parent's association carries the state, and so does the child's own stream.
    assert t.states(CHILD) == [RUNNING, ENDED]
    assert _child_states(t) == [RUNNING, ENDED]
    # The child is announced before its own first state_update.
    assert t.first_mention(CHILD) < t.sent().index(
        next(
            m
            for m in t.sent()
            if m.get("params", {}).get("update", {}).get("sessionUpdate") == "state_update"
            and m["params"]["sessionId"] == CHILD
        )
    )
    t.check()


def test_a_v2_child_is_cancelled_alone_and_confirmed_idle_cancelled_on_its_stream() -> None:
    t = Tree(version=2)
    t.spawn()
    assert t.capabilities(CHILD) == {"cancel": {}}
    t.cancel(CHILD)
    assert t.interrupts() == [{"threadId": CHILD, "turnId": "turn-child"}]
    t.status(CHILD)
    t.turn_completed(CHILD, "turn-child", "interrupted")
    assert _child_states(t)[-1] == {"state": "idle", "stopReason": "cancelled"}
    # The parent's work goes on: no idle for it.
    assert [u["state"] for u in t.updates("state_update", ROOT)] == ["running"]
    t.check()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
        ("session/set_title", {"title": "mine"}),
        ("session/archive", {}),
        ("session/resume", {"cwd": "/work"}),
    ],
)
def test_a_v2_client_cannot_change_a_child(method: str, params: dict[str, Any]) -> None:
    t = Tree(version=2)
    t.spawn()
    rid = t.request(method, {"sessionId": CHILD, **params})
    error = t.h.error(rid)
    assert error.code == -32602 and "subagent session" in error.message
    t.check()


def test_archived_sessions_are_listed_on_request_and_include_is_refused_with_the_reason() -> None:
    h = V2()
    rid = h.client_request("session/list", {"archived": "only"})
    listed = h.codex_request("thread/list")
    assert listed["params"]["archived"] is True
    h.codex_reply(listed["id"], {"data": [stored_thread([])], "nextCursor": None})
    [info] = h.result(rid, ListSessionsResult).sessions
    assert info.sessionId == THREAD and info.archived is True
    default = h.client_request("session/list", {})
    assert "archived" not in h.codex_request("thread/list")["params"]
    h.codex_reply(h.codex_request("thread/list")["id"], {"data": [], "nextCursor": None})
    assert h.result(default) == {"sessions": []}
    both = h.client_request("session/list", {"archived": "include"})
    error = h.error(both)
    assert error.code == -32602 and "include" in error.message
    h.validate()


def test_a_turn_codex_starts_without_a_prompt_is_work_too() -> None:
    """A goal's turn, or another client's on a shared thread: running, then idle."""
    h = V2()
    h.new_session()
    h.codex_notify(
        "turn/started",
        {"threadId": "thread-1", "turn": {"id": "goal-1", "status": "inProgress", "items": []}},
    )
    assert h.states("thread-1") == [RUNNING]
    h.complete_turn("thread-1", "goal-1")
    assert h.states("thread-1") == [RUNNING, ENDED]
    h.validate()


def test_a_prompts_turn_reported_before_codex_answers_turn_start_ends_once() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1")
    h.codex_notify(
        "turn/started",
        {"threadId": "thread-1", "turn": {"id": "turn-1", "status": "inProgress", "items": []}},
    )
    h.accept_turn("turn-1")
    h.complete_turn("thread-1", "turn-1")
    assert h.result(rid) == {"messageId": "um-turn-1"}
    assert h.states("thread-1") == [RUNNING, ENDED]
    h.validate()


def _command_started(h: V2, call: str = "call-1", command: str = "sleep 30") -> None:
    h.codex_notify(
        "item/started",
        {
            "threadId": "thread-1",
            "turnId": "turn-1",
            "item": {
                "type": "commandExecution",
                "id": call,
                "command": command,
                "cwd": "/work",
                "status": "inProgress",
                "commandActions": [{"type": "unknown", "command": command}],
                "processId": "4242",
            },
        },
    )


def _tool_updates(h: V2, call: str = "call-1") -> list[dict[str, Any]]:
    return [
        u
        for u in h.updates("thread-1")
        if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == call
    ]


def test_a_running_command_can_be_cancelled_alone_and_ends_cancelled() -> None:
    h = V2.with_turn()
    _command_started(h)
    assert _tool_updates(h)[0]["capabilities"] == {"cancel": {}}
    rid = h.cancel_call()
    listed = h.codex_request("thread/backgroundTerminals/list")
    assert listed["params"] == {"threadId": "thread-1"}
    h.codex_reply(
        listed["id"],
        {"data": [{"itemId": "call-1", "processId": "4242", "command": "sleep 30"}]},
    )
    terminate = h.codex_request("thread/backgroundTerminals/terminate")
    assert terminate["params"] == {"threadId": "thread-1", "processId": "4242"}
    assert h.client_response(rid) is None  # accepted once Codex took it
    h.codex_reply(terminate["id"], {"terminated": True})
    assert h.result(rid) == {}
    h.codex_notify(
        "item/completed",
        {
            "threadId": "thread-1",
            "turnId": "turn-1",
            "item": {
                "type": "commandExecution",
                "id": "call-1",
                "command": "sleep 30",
                "cwd": "/work",
                "status": "failed",
                "exitCode": -1,
                "commandActions": [{"type": "unknown", "command": "sleep 30"}],
            },
        },
    )
    last = _tool_updates(h)[-1]
    assert last["status"] == "cancelled" and last["capabilities"] is None
    # The turn goes on: cancelling one tool call changes no work state.
    assert h.states("thread-1") == [RUNNING]
    again = h.cancel_call()
    assert h.error(again).code == -32602
    h.validate()


def test_a_command_that_finished_first_keeps_its_own_status() -> None:
    h = V2.with_turn()
    _command_started(h, command="true")
    rid = h.cancel_call()
    h.codex_reply(h.codex_request("thread/backgroundTerminals/list")["id"], {"data": []})
    assert h.result(rid) == {}
    assert "thread/backgroundTerminals/terminate" not in [m.get("method") for m in h.to_codex]
    h.validate()


def test_resuming_a_thread_codex_still_works_on_reports_that_work_and_its_end() -> None:
    """A shared Codex (the daemon's): another client left a turn waiting on the user."""
    h = V2()
    rid = h.client_request("session/resume", {"sessionId": THREAD, "cwd": CWD})
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([])})
    waiting = resume_result()
    waiting["thread"]["status"] = {"type": "active", "activeFlags": ["waitingOnApproval"]}
    h.codex_reply(h.codex_request("thread/resume")["id"], waiting)
    assert "result" in h.client_response(rid)  # type: ignore[operator]
    assert h.states(THREAD) == [{"state": "requires_action"}]
    h.complete_turn(THREAD, "turn-left-running")
    assert h.states(THREAD)[-1] == ENDED
    h.validate()


def test_a_slash_command_is_inserted_with_an_id_of_the_bridges() -> None:
    h = V2()
    rid = h.client_request("session/new", {"cwd": "/work"})
    opened = resume_result("thread-1")  # with the settings a thread reports
    h.codex_reply(h.codex_request("thread/start")["id"], opened)
    assert "result" in h.client_response(rid)  # type: ignore[operator]
    rid = h.prompt("thread-1", "/compact")
    compact = h.codex_request("thread/compact/start")
    h.codex_reply(compact["id"], {})
    message_id = h.result(rid, v2.PromptResult).messageId
    assert message_id.startswith("thread-1-prompt-")
    h.validate()


def test_a_turns_traffic_before_its_user_message_item_inserts_the_prompt_first() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt("thread-1")
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    h.codex_notify(
        "turn/plan/updated",
        {"threadId": "thread-1", "turnId": "turn-1", "plan": [{"step": "a", "status": "pending"}]},
    )
    answered = h.to_client.index(h.client_response(rid))  # type: ignore[arg-type]
    plan = next(n for n, m in enumerate(h.to_client) if "plan_update" in str(m))
    assert answered < plan
    h.validate()


def test_a_file_change_is_structured_changes_and_a_git_patch_with_absolute_paths() -> None:
    h = V2.with_turn()
    changes = [
        {
            "path": "/work/notes.md",
            "kind": {"type": "update", "move_path": None},
            "diff": "@@ -7,2 +7,2 @@\n keep\n-old line\n+new line\n",
        },
        {"path": "/work/new.txt", "kind": {"type": "add"}, "diff": "hello\n"},
    ]
    item = {"type": "fileChange", "id": "call_p", "changes": changes, "status": "inProgress"}
    h.codex_notify("item/started", {"threadId": "thread-1", "turnId": "turn-1", "item": item})
    [call] = [u for u in h.updates("thread-1") if u.get("toolCallId") == "call_p"]
    update, added = call["content"]
    assert update["changes"] == [{"operation": "modify", "path": "/work/notes.md"}]
    assert update["patch"]["format"] == "git_patch"
    assert update["patch"]["text"] == (
        "diff --git /work/notes.md /work/notes.md\n"
        "--- /work/notes.md\n"
        "+++ /work/notes.md\n"
        "@@ -7,2 +7,2 @@\n"
        " keep\n"
        "-old line\n"
        "+new line\n"
    )
    assert added["changes"] == [{"operation": "add", "path": "/work/new.txt"}]
    assert added["patch"]["text"] == (
        "diff --git /work/new.txt /work/new.txt\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ /work/new.txt\n"
        "@@ -0,0 +1 @@\n"
        "+hello\n"
    )
    h.validate()


def test_compaction_is_a_compaction_update_for_every_v2_client() -> None:
    """v2 has no session.compaction capability: compaction_update is baseline there."""
    h = V2.with_turn()
    item = {"type": "contextCompaction", "id": "compact-1"}
    h.codex_notify("item/started", {"threadId": "thread-1", "turnId": "turn-1", "item": item})
    kinds = [u["sessionUpdate"] for u in h.updates("thread-1")]
    assert "compaction_update" in kinds and "tool_call_update" not in kinds
    h.validate()


def test_a_codex_without_the_terminal_methods_stops_offering_cancel_and_says_why() -> None:
    h = V2.with_turn()
    _command_started(h)
    rid = h.cancel_call()
    listed = h.codex_request("thread/backgroundTerminals/list")
    h.codex_error(
        listed["id"], "Invalid request: unknown variant `thread/backgroundTerminals/list`"
    )
    error = h.error(rid)
    assert error.code == -32602 and "session/cancel" in error.message
    _command_started(h, call="call-2")
    assert "capabilities" not in _tool_updates(h, "call-2")[0]
    h.validate()
