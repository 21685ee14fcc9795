"""Plan mode's proposed plan (Codex's ``plan`` item), and "Implement this plan?" after it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from bridge.codex.messages import decode_item
from bridge.engine.views import history
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness, Windows
from tests.test_config import thread_started
from tests.test_v2 import V2

THREAD, TURN, ITEM = "thread-1", "turn-1", "plan-item-1"
PLAN = "# Add a greeting\n\n- write hello.txt\n"


def _open(h: Harness) -> None:
    """``session/new`` answered with what Codex says of a thread's settings."""
    params: dict[str, Any] = {"cwd": "/work"}
    if not isinstance(h, V2):
        params["mcpServers"] = []
    rid = h.client_request("session/new", params)
    h.codex_reply(h.codex_request("thread/start")["id"], thread_started(THREAD, cwd="/work"))
    assert h.result(rid)["sessionId"] == THREAD


def _v1(**capabilities: Any) -> Harness:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    _open(h)
    return h


def _v2() -> V2:
    h = V2()
    _open(h)
    return h


def _turn_started(h: Harness, turn: str = TURN) -> None:
    started = {"id": turn, "status": "inProgress", "items": []}
    h.codex_notify("turn/started", {"threadId": THREAD, "turn": started})


def _propose(h: Harness, *, turn: str = TURN, item: str = ITEM, text: str = PLAN) -> None:
    """Codex streams a plan item, then completes it."""
    started = {"type": "plan", "id": item, "text": ""}
    h.codex_notify("item/started", {"threadId": THREAD, "turnId": turn, "item": started})
    for delta in ("# Add", " a greeting\n\n- write hello.txt\n"):
        h.turn_notify("item/plan/delta", THREAD, turn, itemId=item, delta=delta)
    done = {"type": "plan", "id": item, "text": text}
    h.codex_notify("item/completed", {"threadId": THREAD, "turnId": turn, "item": done})


def _planned(h: Harness, status: str = "completed") -> int:
    """A prompt whose turn proposes a plan and ends with ``status``; the prompt's id."""
    rid = h.start_prompt(THREAD) if not isinstance(h, V2) else h.prompt(THREAD)
    if isinstance(h, V2):
        h.accept_turn()
    _turn_started(h)
    _propose(h)
    h.complete_turn(THREAD, status=status)
    return rid


def _asked(h: Harness, method: str = "session/request_permission") -> list[dict[str, Any]]:
    return [m for m in h.to_client if m.get("method") == method]


def _answer(h: Harness, request: dict[str, Any], result: Any) -> None:
    h.client_raw(msgspec.json.encode({"jsonrpc": "2.0", "id": request["id"], "result": result}))


def _validate(h: Harness, version: int = 1) -> None:
    """The bridge's requests and notifications are valid ACP (its answers are the harness's)."""
    validator = ConversationValidator(version=version, unstable=True)
    for message in h.to_client:
        if "method" in message:
            validator.agent_sent(message)


IMPLEMENT = {"outcome": {"outcome": "selected", "optionId": "implement"}}
STAY = {"outcome": {"outcome": "selected", "optionId": "stay"}}


# -- the plan, shown ------------------------------------------------------------------------


def test_a_client_that_takes_plans_gets_the_proposed_plan_once_whole_in_markdown() -> None:
    h = _v1(plan={})
    _planned(h)
    plans = [u for u in h.updates(THREAD) if u["sessionUpdate"].startswith("plan")]
    assert plans == [
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "markdown", "planId": ITEM, "content": PLAN},
        }
    ]
    assert not [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_message_chunk"]
    _validate(h)


def test_any_other_v1_client_reads_the_plan_as_the_agents_message() -> None:
    h = _v1()
    _planned(h)
    chunks = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_message_chunk"]
    assert chunks == [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": PLAN},
            "messageId": ITEM,
        }
    ]
    assert not [u for u in h.updates(THREAD) if u["sessionUpdate"].startswith("plan")]


def test_a_v2_client_gets_a_markdown_plan_update_apart_from_the_turn_plan() -> None:
    h = _v2()
    _planned(h)
    h.validate()
    plans = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "plan_update"]
    assert [p["plan"] for p in plans] == [{"type": "markdown", "planId": ITEM, "content": PLAN}]


def test_an_empty_plan_is_not_shown_nor_asked_about() -> None:
    h = _v1(plan={})
    h.start_prompt(THREAD)
    _turn_started(h)
    _propose(h, text="  \n")
    h.complete_turn(THREAD)
    assert not [u for u in h.updates(THREAD) if u["sessionUpdate"] == "plan_update"]
    assert not _asked(h)


def test_a_stored_plan_replays_as_the_live_one_shows() -> None:
    raw = msgspec.Raw(msgspec.json.encode({"type": "plan", "id": ITEM, "text": PLAN}))
    [update] = history.item_updates(decode_item(raw))
    assert msgspec.to_builtins(update) == {
        "sessionUpdate": "plan_update",
        "plan": {"type": "markdown", "planId": ITEM, "content": PLAN},
    }


# -- the question ---------------------------------------------------------------------------


def test_after_the_prompts_answer_the_user_is_asked_to_implement_it() -> None:
    h = _v1()
    rid = _planned(h)
    answered = next(i for i, m in enumerate(h.to_client) if m.get("id") == rid)
    [request] = _asked(h)
    assert h.to_client.index(request) > answered
    params = request["params"]
    assert params["toolCall"]["title"] == "Implement this plan?"
    assert params["toolCall"]["kind"] == "switch_mode"
    assert [(o["optionId"], o["name"], o["kind"]) for o in params["options"]] == [
        ("implement", "Yes, implement this plan", "allow_once"),
        ("stay", "No, stay in Plan mode", "reject_once"),
    ]
    # The tool call it names was shown first, pending.
    call_id = params["toolCall"]["toolCallId"]
    [shown] = [u for u in h.updates(THREAD) if u.get("toolCallId") == call_id]
    assert shown["sessionUpdate"] == "tool_call" and shown["status"] == "pending"
    _validate(h)


def _plan_mode(h: Harness) -> None:
    """``/plan``: the session in Plan mode."""
    h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "/plan"}]}
    )
    stored = h.codex_request("thread/settings/update")
    assert stored["params"]["collaborationMode"]["mode"] == "plan"
    h.codex_reply(stored["id"], {})


def _collaboration(h: Harness) -> str:
    options = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "config_option_update"]
    [mode] = [
        o
        for o in options[-1]["configOptions"]
        if o.get("id", o.get("configId")) == "collaboration_mode"
    ]
    return str(mode["currentValue"])


def test_implementing_switches_to_default_then_starts_the_turn_that_carries_it_out() -> None:
    h = _v1()
    _plan_mode(h)
    assert _collaboration(h) == "plan"
    _planned(h)
    [request] = _asked(h)
    starts = len([m for m in h.to_codex if m.get("method") == "turn/start"])
    _answer(h, request, IMPLEMENT)
    stored = h.codex_request("thread/settings/update")
    assert stored["params"]["collaborationMode"]["mode"] == "default"
    assert len([m for m in h.to_codex if m.get("method") == "turn/start"]) == starts
    h.codex_reply(stored["id"], {})
    assert _collaboration(h) == "default"
    started = h.codex_request("turn/start")
    assert started["params"]["input"] == [{"type": "text", "text": "Implement the plan."}]
    # Its updates are the session's, as a turn no prompt waits for.
    h.codex_reply(started["id"], {"turn": {"id": "turn-2", "status": "inProgress", "items": []}})
    item = {"type": "userMessage", "id": "um-2", "content": [{"type": "text", "text": "x"}]}
    h.codex_notify("item/completed", {"threadId": THREAD, "turnId": "turn-2", "item": item})
    assert h.updates(THREAD)[-1]["sessionUpdate"] == "user_message_chunk"
    statuses = [u.get("status") for u in h.updates(THREAD) if u.get("toolCallId")]
    assert statuses == ["pending", "completed"]
    _validate(h)


def test_with_a_codex_that_cannot_store_settings_the_implementing_turn_carries_default() -> None:
    # A Codex without thread/settings/update: the mode goes with the turn/start instead,
    # as any pick does there; the user's "yes" is never lost.
    h = _v1()
    _plan_mode(h)
    _planned(h)
    starts = len([m for m in h.to_codex if m.get("method") == "turn/start"])
    _answer(h, _asked(h)[0], IMPLEMENT)
    stored = h.codex_request("thread/settings/update")
    h.codex_error(stored["id"], "Invalid request: unknown variant `thread/settings/update`")
    *_, started = [m for m in h.to_codex if m.get("method") == "turn/start"]
    assert len([m for m in h.to_codex if m.get("method") == "turn/start"]) == starts + 1
    assert started["params"]["input"] == [{"type": "text", "text": "Implement the plan."}]
    assert started["params"]["collaborationMode"]["mode"] == "default"
    assert _collaboration(h) == "default"
    _validate(h)


@pytest.mark.parametrize("answer", [STAY, {"outcome": {"outcome": "cancelled"}}, {"bad": 1}])
def test_staying_in_plan_mode_changes_nothing(answer: Any) -> None:
    h = _v1()
    _planned(h)
    sent, told = len(h.to_codex), len(h.updates(THREAD))
    _answer(h, _asked(h)[0], answer)
    assert h.to_codex[sent:] == []
    assert [u.get("status") for u in h.updates(THREAD)[told:]] == ["completed"]


def test_a_client_that_elicits_is_asked_with_a_form_of_the_two_choices() -> None:
    h = _v1(elicitation={"form": {}})
    _planned(h)
    assert not _asked(h)
    [request] = _asked(h, "elicitation/create")
    assert request["params"]["message"] == "Implement this plan?"
    field = request["params"]["requestedSchema"]["properties"]["decision"]
    assert [c["const"] for c in field["oneOf"]] == ["implement", "stay"]
    _validate(h)
    _answer(h, request, {"action": "accept", "content": {"decision": "implement"}})
    assert h.codex_request("thread/settings/update")


def test_a_decline_of_the_form_stays() -> None:
    h = _v1(elicitation={"form": {}})
    _planned(h)
    sent = len(h.to_codex)
    _answer(h, _asked(h, "elicitation/create")[0], {"action": "decline"})
    assert h.to_codex[sent:] == []


@pytest.mark.parametrize("status", ["interrupted", "failed"])
def test_a_turn_that_did_not_complete_asks_nothing(status: str) -> None:
    h = _v1()
    _planned(h, status)
    assert not _asked(h)


def test_another_clients_turn_asks_nothing_here() -> None:
    h = _v1()
    _turn_started(h)
    _propose(h)
    h.complete_turn(THREAD)
    assert [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_message_chunk"]
    assert not _asked(h)


def _withdrawn(h: Harness, request: dict[str, Any]) -> None:
    cancels = [m for m in h.to_client if m.get("method") == "$/cancel_request"]
    assert [c["params"] for c in cancels] == [{"requestId": request["id"]}]
    call_id = request["params"]["toolCall"]["toolCallId"]
    assert [u.get("status") for u in h.updates(THREAD) if u.get("toolCallId") == call_id] == [
        "pending",
        "failed",
    ]


@pytest.mark.parametrize(
    "withdraw",
    [
        pytest.param(
            lambda h: h.client_request(
                "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "no"}]}
            ),
            id="a-new-prompt",
        ),
        pytest.param(
            lambda h: h.client_notify("session/cancel", {"sessionId": THREAD}), id="a-cancel"
        ),
    ],
)
def test_the_client_withdraws_the_question_and_a_late_yes_does_nothing(
    withdraw: Callable[[Harness], object],
) -> None:
    h = _v1()
    _planned(h)
    [request] = _asked(h)
    withdraw(h)
    _withdrawn(h, request)
    sent = len(h.to_codex)
    _answer(h, request, IMPLEMENT)
    assert h.to_codex[sent:] == []


def test_another_turn_on_the_session_withdraws_the_question() -> None:
    h = _v1()
    _planned(h)
    [request] = _asked(h)
    _turn_started(h, "turn-9")
    _withdrawn(h, request)


def test_a_prompt_queued_behind_the_planning_turn_means_no_question() -> None:
    h = _v1()
    h.start_prompt(THREAD)
    _turn_started(h)
    _propose(h)
    h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "b"}]}
    )
    h.complete_turn(THREAD)
    assert not _asked(h)


def test_a_prompt_sent_while_default_mode_is_stored_takes_the_implementing_turns_place() -> None:
    h = _v1()
    _planned(h)
    _answer(h, _asked(h)[0], IMPLEMENT)
    stored = h.codex_request("thread/settings/update")
    h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": "b"}]}
    )
    h.codex_reply(stored["id"], {})
    inputs = [m["params"]["input"] for m in h.to_codex if m.get("method") == "turn/start"]
    assert inputs[-1] == [{"type": "text", "text": "b"}]
    assert {"type": "text", "text": "Implement the plan."} not in [i for s in inputs for i in s]


def test_v2_implementing_runs_the_turn_as_the_sessions_work() -> None:
    h = _v2()
    _plan_mode(h)
    _planned(h)
    [request] = _asked(h)
    assert request["params"]["sessionId"] == THREAD
    _answer(h, request, IMPLEMENT)
    h.codex_reply(h.codex_request("thread/settings/update")["id"], {})
    assert _collaboration(h) == "default"
    started = h.codex_request("turn/start")
    assert started["params"]["input"] == [{"type": "text", "text": "Implement the plan."}]
    h.codex_reply(started["id"], {"turn": {"id": "turn-2", "status": "inProgress", "items": []}})
    _turn_started(h, "turn-2")
    h.complete_turn(THREAD, "turn-2")
    assert [s["state"] for s in h.states(THREAD)][-2:] == ["running", "idle"]
    h.validate()


# -- the question's state (v2) ----------------------------------------------------------------


def _states(h: V2) -> list[str]:
    return [s["state"] for s in h.states(THREAD)]


def test_v2_the_session_requires_action_while_the_question_waits_then_idle_once_answered() -> None:
    h = _v2()
    _planned(h)
    [request] = _asked(h)
    assert _states(h) == ["running", "idle", "requires_action"]
    # The state the bridge holds, as session/status says it.
    status = h.client_request("session/status", {"sessionId": THREAD})
    assert h.result(status) == {"status": "open", "state": {"state": "requires_action"}}
    _answer(h, request, STAY)
    assert _states(h) == ["running", "idle", "requires_action", "idle"]
    h.validate()


def test_v2_implementing_leaves_requires_action_for_the_implementing_turns_work() -> None:
    h = _v2()
    _plan_mode(h)
    _planned(h)
    _answer(h, _asked(h)[0], IMPLEMENT)
    h.codex_reply(h.codex_request("thread/settings/update")["id"], {})
    started = h.codex_request("turn/start")
    h.codex_reply(started["id"], {"turn": {"id": "turn-2", "status": "inProgress", "items": []}})
    _turn_started(h, "turn-2")
    assert _states(h)[-4:] == ["idle", "requires_action", "idle", "running"]
    h.complete_turn(THREAD, "turn-2")
    assert _states(h)[-1] == "idle"
    h.validate()


def test_v2_a_prompt_that_withdraws_the_question_runs_without_requiring_action() -> None:
    """The withdrawn question waits on the user no more, whether or not the client answers
    the withdrawal; its late answer changes nothing."""
    h = _v2()
    _planned(h)
    [request] = _asked(h)
    h.prompt(THREAD, "something else")
    h.accept_turn("turn-2")
    assert _states(h)[2:] == ["requires_action", "idle", "running"]
    told, sent = len(_states(h)), len(h.to_codex)
    _answer(h, request, IMPLEMENT)
    assert len(_states(h)) == told and h.to_codex[sent:] == []
    h.validate()


def test_v2_reopening_while_asked_is_refused_and_the_question_stands_to_be_answered_once() -> None:
    h = _v2()
    _planned(h)
    [request] = _asked(h)
    reopen = h.client_request(
        "session/resume", {"sessionId": THREAD, "cwd": "/work", "replayFrom": {"type": "start"}}
    )
    assert h.error(reopen).code == -32600
    assert _states(h)[-1] == "requires_action"
    _answer(h, request, IMPLEMENT)
    assert h.codex_request("thread/settings/update")
    assert len(_asked(h)) == 1
    h.validate()


def test_v2_closing_then_reopening_withdraws_the_question_and_resumes_idle() -> None:
    h = _v2()
    _planned(h)
    [request] = _asked(h)
    close = h.client_request("session/close", {"sessionId": THREAD})
    h.codex_reply(h.codex_request("thread/unsubscribe")["id"], {"status": "unsubscribed"})
    assert h.result(close) == {}
    assert [m["params"] for m in h.to_client if m.get("method") == "$/cancel_request"] == [
        {"requestId": request["id"]}
    ]
    reopen = h.client_request(
        "session/resume", {"sessionId": THREAD, "cwd": "/work", "replayFrom": {"type": "start"}}
    )
    thread = {"id": THREAD, "cwd": "/work", "preview": "", "status": {"type": "idle"}, "turns": []}
    replied: set[Any] = set()
    for _ in range(10):
        if h.client_response(reopen) is not None:
            break
        for m in [m for m in h.to_codex if "method" in m and "id" in m and m["id"] not in replied]:
            replied.add(m["id"])
            if m["method"] == "thread/read":
                h.codex_reply(m["id"], {"thread": thread})
            elif m["method"] == "thread/resume":
                h.codex_reply(m["id"], {"thread": thread, "model": "mock"})
            else:
                h.codex_reply(m["id"], {})
    assert "result" in (h.client_response(reopen) or {}), h.client_response(reopen)
    assert _states(h)[-1] == "idle"
    assert len(_asked(h)) == 1  # not asked again
    sent = len(h.to_codex)
    _answer(h, request, IMPLEMENT)
    assert h.to_codex[sent:] == []
    h.validate()


def test_a_second_window_is_not_asked_and_its_prompt_withdraws_the_first_windows_question() -> None:
    """Two v2 windows on one shared Codex: the window whose prompt proposed the plan asks;
    the other is not asked and shows the session idle once the turn ended. A prompt from
    the other window withdraws the question: it is answered at most once, by the first."""
    w = Windows()
    w.a, w.b = V2(codex_shared=True), V2(codex_shared=True)
    w.a.new_session(THREAD)
    w.open("session/resume")
    w.a.prompt(THREAD)
    w.a.accept_turn()
    w.notify(
        "turn/started",
        {"threadId": THREAD, "turn": {"id": TURN, "status": "inProgress", "items": []}},
    )
    for method, text in (("item/started", ""), ("item/completed", PLAN)):
        item = {"type": "plan", "id": ITEM, "text": text}
        w.notify(method, {"threadId": THREAD, "turnId": TURN, "item": item})
    w.notify(
        "turn/completed",
        {"threadId": THREAD, "turn": {"id": TURN, "status": "completed", "items": []}},
    )
    [request] = _asked(w.a)
    assert not _asked(w.b)
    assert _states(w.a)[-1] == "requires_action"
    assert _states(w.b)[-1] == "idle"
    # The other window's prompt starts a turn: the question is withdrawn in the first.
    w.b.prompt(THREAD, "go on")
    w.b.accept_turn("turn-2")
    w.notify(
        "turn/started",
        {"threadId": THREAD, "turn": {"id": "turn-2", "status": "inProgress", "items": []}},
    )
    assert [m["params"] for m in w.a.to_client if m.get("method") == "$/cancel_request"] == [
        {"requestId": request["id"]}
    ]
    assert _states(w.a)[-2:] == ["idle", "running"]
    sent = len(w.a.to_codex)
    _answer(w.a, request, IMPLEMENT)
    assert w.a.to_codex[sent:] == []
    for window in w.both():
        assert isinstance(window, V2)
        window.validate()
