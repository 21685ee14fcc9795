"""The slash commands answered without a turn, in the engine alone (the real Codex runs
them in ``tests/test_e2e_config.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_harness import skills_list
from tests.support.reading import text_of
from tests.test_config import THREAD, H, open_session, prompt


def ran(command: str) -> tuple[H, int]:
    """A session open, and ``command`` prompted in it (its request's id)."""
    h = H()
    open_session(h)
    return h, run(h, command)


def run(h: H, text: str) -> int:
    return h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}
    )


def answer(h: H, method: str, result: Any) -> dict[str, Any]:
    request = h.codex_request(method)
    h.codex_reply(request["id"], result)
    return request["params"]  # type: ignore[no-any-return]


def said(h: H) -> str:
    chunks = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_message_chunk"]
    return text_of(chunks[-1:])


def test_status_tells_model_mode_context_account_and_limits() -> None:
    h = H()
    open_session(h, effort="high")
    h.codex_notify(
        "thread/tokenUsage/updated",
        {
            "threadId": THREAD,
            "turnId": "t",
            "tokenUsage": {
                "total": {
                    "totalTokens": 900,
                    "inputTokens": 0,
                    "cachedInputTokens": 0,
                    "outputTokens": 0,
                    "reasoningOutputTokens": 0,
                },
                "last": {
                    "totalTokens": 5000,
                    "inputTokens": 0,
                    "cachedInputTokens": 0,
                    "outputTokens": 0,
                    "reasoningOutputTokens": 0,
                },
                "modelContextWindow": 200000,
            },
        },
    )
    rid = run(h, "/status")
    assert not h.sent_codex("turn/start")
    answer(h, "account/read", {"account": {"type": "apiKey"}, "requiresOpenaiAuth": True})
    assert h.client_response(rid) is None  # both answers first
    h.codex_error(h.codex_request("account/rateLimits/read")["id"], "not signed in with ChatGPT")
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    for fact in (
        THREAD,
        "Model: mock-model (reasoning effort high)",
        "Mode: Default",
        "5,000 of 200,000 tokens (2% used)",
        "Account: an API key",
        "Usage limits: not available",
    ):
        assert fact in text, (fact, text)
    h.validate()


def test_mcp_lists_servers_their_state_and_tools() -> None:
    h, rid = ran("/mcp")
    params = answer(
        h,
        "mcpServerStatus/list",
        {
            "data": [
                {
                    "name": "echo",
                    "authStatus": "unsupported",
                    "runtimeStatus": "connected",
                    "tools": {"say": {}, "add": {}},
                    "resources": [],
                    "resourceTemplates": [],
                },
                {
                    "name": "broken",
                    "authStatus": "notLoggedIn",
                    "runtimeStatus": "failed",
                    "tools": {},
                    "toolsError": "could not start",
                    "resources": [],
                    "resourceTemplates": [],
                },
            ],
            "nextCursor": None,
        },
    )
    assert params == {"threadId": THREAD}
    assert h.result(rid) == {"stopReason": "end_turn"}
    text = said(h)
    assert "**echo**: connected" in text and "`add`, `say`" in text
    assert "**broken**: failed" in text and "could not start" in text


def test_skills_lists_the_workspaces_skills() -> None:
    h, rid = ran("/skills")
    params = answer(
        h,
        "skills/list",
        skills_list(("deploy", "Ship it", True, "/s/deploy"), ("lint", "", False, "/s/lint")),
    )
    assert params == {"cwds": ["/work"]}
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert "**deploy**: Ship it" in said(h) and "**lint** (disabled)" in said(h)


GOAL = {
    "objective": "ship v2",
    "status": "active",
    "tokensUsed": 1200,
    "timeUsedSeconds": 30,
    "threadId": THREAD,
    "createdAt": 1,
    "updatedAt": 2,
}


@pytest.mark.parametrize(
    ("text", "method", "params", "result", "words"),
    [
        ("/goal", "thread/goal/get", {"threadId": THREAD}, {"goal": None}, "has no goal"),
        ("/goal", "thread/goal/get", {"threadId": THREAD}, {"goal": GOAL}, "(active): ship v2"),
        (
            "/goal ship v2",
            "thread/goal/set",
            {"threadId": THREAD, "objective": "ship v2", "status": "active"},
            {"goal": GOAL},
            "Goal set.",
        ),
        (
            "/goal pause",
            "thread/goal/set",
            {"threadId": THREAD, "status": "paused"},
            {"goal": {**GOAL, "status": "paused"}},
            "Goal paused.",
        ),
        (
            "/goal resume",
            "thread/goal/set",
            {"threadId": THREAD, "status": "active"},
            {"goal": GOAL},
            "Goal resumed.",
        ),
        ("/goal clear", "thread/goal/clear", {"threadId": THREAD}, {"cleared": True}, "cleared"),
        (
            "/rename The login bug",
            "thread/name/set",
            {"threadId": THREAD, "name": "The login bug"},
            {},
            "Renamed this session to “The login bug”.",
        ),
        ("/logout", "account/logout", {}, {}, "Signed out of Codex"),
    ],
)
def test_commands_that_change_state_say_what_changed(
    text: str, method: str, params: Any, result: Any, words: str
) -> None:
    h = H()
    open_session(h)
    rid = run(h, text)
    assert answer(h, method, result) == params
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert words in said(h), said(h)
    h.validate()


def test_codex_refusing_a_command_is_the_prompts_error() -> None:
    h, rid = ran("/rename x")
    h.codex_error(h.codex_request("thread/name/set")["id"], "name too long")
    assert "name too long" in h.error(rid).message
    # The session is free again.
    later = prompt(h, "hi")
    assert h.client_response(later) is None


def test_a_prompt_sent_while_a_command_runs_queues_behind_it() -> None:
    h, rid = ran("/skills")
    queued = run(h, "hello")
    assert not h.sent_codex("turn/start")
    answer(h, "skills/list", {"data": []})
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert h.sent_codex("turn/start")[-1]["params"]["input"][0]["text"] == "hello"
    assert h.client_response(queued) is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("/status now", "takes no arguments"),
        ("/rename", "needs a name"),
        ("/review-branch", "base branch"),
        ("/review-commit a b", "one commit SHA"),
    ],
)
def test_misused_commands_are_clear_errors(text: str, needle: str) -> None:
    h = H()
    open_session(h)
    error = h.error(run(h, text))
    assert error.code == -32602 and needle in error.message


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("/review-branch main", {"type": "baseBranch", "branch": "main"}),
        ("/review-commit 1a2b3c", {"type": "commit", "sha": "1a2b3c"}),
    ],
)
def test_reviews_of_a_branch_or_a_commit_start_a_review_turn(text: str, target: Any) -> None:
    h = H()
    open_session(h)
    run(h, text)
    assert h.codex_request("review/start")["params"] == {"threadId": THREAD, "target": target}


@pytest.mark.parametrize(
    ("text", "mode", "words"),
    [("/plan", "plan", "Plan mode on"), ("/plan off", "default", "Plan mode off")],
)
def test_plan_switches_codexs_collaboration_mode_in_the_thread(
    text: str, mode: str, words: str
) -> None:
    h = H()
    open_session(h, effort="high")
    rid = run(h, text)
    params = answer(h, "thread/settings/update", {})
    assert params == {
        "threadId": THREAD,
        "collaborationMode": {
            "mode": mode,
            "settings": {
                "model": "mock-model",
                "reasoning_effort": "high",
                "developer_instructions": None,
            },
        },
    }
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert words in said(h)


def test_plan_takes_no_other_argument() -> None:
    h = H()
    open_session(h)
    assert h.error(run(h, "/plan the refactor")).code == -32602


def test_a_turn_codex_starts_while_a_command_runs_does_not_answer_the_command() -> None:
    """Resuming a goal makes Codex start working on it at once, in a turn of its own, often
    before it answers the command: that turn is shown, but the command keeps its answer."""
    h, rid = ran("/goal resume")
    request = h.codex_request("thread/goal/set")
    h.codex_notify(
        "turn/started",
        {"threadId": THREAD, "turn": {"id": "goal-turn", "items": [], "status": "inProgress"}},
    )
    h.codex_notify(
        "item/agentMessage/delta",
        {"threadId": THREAD, "turnId": "goal-turn", "itemId": "m1", "delta": "working"},
    )
    h.complete_turn(THREAD, "goal-turn")
    assert h.client_response(rid) is None, "Codex's own turn is not the command's answer"
    h.codex_reply(request["id"], {"goal": GOAL})
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert "Goal resumed." in said(h)
    h.validate()
