"""A turn's own tokens in the prompt's answer (v1's ``PromptResponse.usage``, v2's
``state_update: idle``'s ``usage``), and the session's cost on ``usage_update``."""

from __future__ import annotations

from typing import Any

import msgspec

from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness
from tests.test_v2 import V2


def breakdown(total: int, cached: int = 0, reasoning: int = 0, write: int | None = None) -> Any:
    """Codex's ``TokenUsageBreakdown``: ``total`` tokens, three quarters of them input."""
    counts = {
        "totalTokens": total,
        "inputTokens": total * 3 // 4,
        "cachedInputTokens": cached,
        "outputTokens": total - total * 3 // 4,
        "reasoningOutputTokens": reasoning,
    }
    if write is not None:
        counts["cacheWriteInputTokens"] = write
    return counts


def tokens(h: Harness, turn: str, last: Any, total: Any, window: int | None = 1000) -> None:
    usage: dict[str, Any] = {"last": last, "total": total}
    if window is not None:
        usage["modelContextWindow"] = window
    h.codex_notify(
        "thread/tokenUsage/updated", {"threadId": "thread-1", "turnId": turn, "tokenUsage": usage}
    )


class V1(Harness):
    """A v1 client (initialized at once) whose every message is kept for validation."""

    def __init__(self, **options: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(**options)
        self.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def client_raw(self, data: bytes) -> list[dict[str, Any]]:
        self.sent.append(msgspec.json.decode(data))
        return super().client_raw(data)


def validate_v1(h: V1) -> None:
    """Every message sent to the client is valid ACP v1 (unstable) for what it answers."""
    validator = ConversationValidator(unstable=True)
    for message in h.sent:
        validator.client_sent(message)
    for message in h.to_client:
        validator.agent_sent(message)


def v1_session() -> V1:
    h = V1()
    h.new_session()
    return h


def test_v1_the_prompts_answer_says_the_tokens_of_its_own_turn() -> None:
    h = v1_session()
    first = h.start_prompt("thread-1")
    tokens(h, "turn-1", breakdown(100), breakdown(100))
    h.complete_turn("thread-1")
    assert h.result(first)["usage"] == {
        "totalTokens": 100,
        "inputTokens": 75,
        "outputTokens": 25,
        "thoughtTokens": 0,
        "cachedReadTokens": 0,
    }
    # A turn of two model requests: both count ("last" is only the second's), and not
    # what the thread used before it ("total").
    second = h.start_prompt("thread-1", turn_id="turn-2")
    tokens(
        h,
        "turn-2",
        breakdown(300, cached=40, reasoning=10, write=5),
        breakdown(400, cached=40, reasoning=10, write=5),
    )
    tokens(
        h,
        "turn-2",
        breakdown(500, cached=60, reasoning=20, write=0),
        breakdown(900, cached=100, reasoning=30, write=5),
    )
    h.complete_turn("thread-1", turn_id="turn-2")
    assert h.result(second)["usage"] == {
        "totalTokens": 800,
        "inputTokens": 600,
        "outputTokens": 200,
        "thoughtTokens": 30,
        "cachedReadTokens": 100,
        "cachedWriteTokens": 5,
    }
    validate_v1(h)


def test_v1_a_cancelled_turn_says_its_tokens_and_one_codex_counted_none_says_none() -> None:
    h = v1_session()
    rid = h.start_prompt("thread-1")
    tokens(h, "turn-1", breakdown(200), breakdown(700))
    h.client_notify("session/cancel", {"sessionId": "thread-1"})
    h.complete_turn("thread-1", status="interrupted")
    answer = h.result(rid)
    assert answer["stopReason"] == "cancelled"
    assert answer["usage"]["totalTokens"] == 200
    # Tokens of another turn are not this one's; a turn Codex counted nothing for has
    # no usage (never a made-up zero).
    rid = h.start_prompt("thread-1", turn_id="turn-2")
    tokens(h, "turn-1", breakdown(50), breakdown(750))
    h.complete_turn("thread-1", turn_id="turn-2")
    assert h.result(rid) == {"stopReason": "end_turn"}
    validate_v1(h)


def test_v2_the_idle_state_that_ends_a_prompts_work_says_its_tokens() -> None:
    h = V2.with_turn()
    tokens(h, "turn-1", breakdown(300), breakdown(1300))
    tokens(h, "turn-1", breakdown(100), breakdown(1400))
    h.complete_turn("thread-1")
    assert h.states("thread-1")[-1] == {
        "state": "idle",
        "stopReason": "end_turn",
        "usage": {
            "totalTokens": 400,
            "inputTokens": 300,
            "outputTokens": 100,
            "thoughtTokens": 0,
            "cachedReadTokens": 0,
        },
    }
    h.validate()


def test_v1_a_count_codex_repeats_unchanged_is_not_counted_twice() -> None:
    """Codex repeats its last count when the usage limits change, under the turn running
    then: the thread's total, not the sum of ``last``, says a turn's tokens."""
    h = v1_session()
    first = h.start_prompt("thread-1")
    tokens(h, "turn-1", breakdown(100), breakdown(600))
    tokens(h, "turn-1", breakdown(100), breakdown(600))
    h.complete_turn("thread-1")
    assert h.result(first)["usage"]["totalTokens"] == 100
    second = h.start_prompt("thread-1", turn_id="turn-2")
    tokens(h, "turn-2", breakdown(100), breakdown(600))  # turn-1's, repeated
    tokens(h, "turn-2", breakdown(40), breakdown(640))
    h.complete_turn("thread-1", turn_id="turn-2")
    assert h.result(second)["usage"]["totalTokens"] == 40
    validate_v1(h)


# -- cost ----------------------------------------------------------------------------------------


def session_on(h: Harness, provider: str) -> None:
    """Session ``thread-1``, Codex running its thread on ``provider``."""
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    h.codex_reply(
        h.codex_request("thread/start")["id"],
        {
            "thread": {"id": "thread-1", "cwd": "/work"},
            "model": "gpt-test",
            "modelProvider": provider,
            "approvalPolicy": "on-request",
            "sandbox": {"type": "workspaceWrite"},
        },
    )
    assert "result" in (h.client_response(rid) or {})


def cost_reads(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.to_codex if m.get("method") == "account/usage/read"]


def usage_updates(h: Harness) -> list[dict[str, Any]]:
    return [u for u in h.updates("thread-1") if u["sessionUpdate"] == "usage_update"]


def test_v1_codexs_estimate_of_the_cost_is_asked_once_a_turn_and_goes_on_the_usage() -> None:
    h = V1()
    session_on(h, "openai")
    rid = h.start_prompt("thread-1")
    tokens(h, "turn-1", breakdown(100), breakdown(100))
    tokens(h, "turn-1", breakdown(120), breakdown(220))
    assert cost_reads(h) == []  # not per delta: at the turn's end
    h.complete_turn("thread-1")
    assert "result" in (h.client_response(rid) or {})
    [read] = cost_reads(h)
    assert read["params"] == {"threadId": "thread-1"}
    h.codex_reply(
        read["id"],
        {
            "summary": {},
            "threadUsage": {
                "threadId": "thread-1",
                "estimatedUsageCreditsMicros": 9,
                "estimatedUsageUsdMicros": 12_500,
                "groups": [],
            },
        },
    )
    assert usage_updates(h)[-1] == {
        "sessionUpdate": "usage_update",
        "used": 120,
        "size": 1000,
        "cost": {"amount": 0.0125, "currency": "USD"},
    }
    # Later updates keep the cost the client was told.
    h.start_prompt("thread-1", turn_id="turn-2")
    tokens(h, "turn-2", breakdown(50), breakdown(270))
    assert usage_updates(h)[-1]["cost"] == {"amount": 0.0125, "currency": "USD"}
    validate_v1(h)


def a_turn_done_on(provider: str) -> V1:
    """Session ``thread-1`` on ``provider``, its first turn done, 100 tokens its usage."""
    h = V1()
    session_on(h, provider)
    h.start_prompt("thread-1")
    tokens(h, "turn-1", breakdown(100), breakdown(100))
    h.complete_turn("thread-1")
    return h


def test_a_cost_codex_does_not_know_is_never_sent_as_a_zero() -> None:
    h = a_turn_done_on("openai")
    before = len(h.to_client)
    # No billing route for the thread (the estimate unknown), then an API key's refusal.
    h.codex_reply(cost_reads(h)[0]["id"], {"summary": {}, "threadUsage": None})
    h.start_prompt("thread-1", turn_id="turn-2")
    h.complete_turn("thread-1", turn_id="turn-2")
    h.codex_error(
        cost_reads(h)[1]["id"], "codex account authentication required to read token usage"
    )
    assert len(cost_reads(h)) == 2
    assert all("cost" not in u for u in usage_updates(h))
    assert [m for m in h.to_client[before:] if m.get("method") == "session/update"] == []
    validate_v1(h)


def test_a_thread_on_another_provider_is_not_asked_its_cost() -> None:
    h = a_turn_done_on("ollama")
    assert cost_reads(h) == []
    assert all("cost" not in u for u in usage_updates(h))


def test_v2_the_cost_goes_on_the_usage_update() -> None:
    h = V2()
    session_on(h, "openai")
    h.prompt("thread-1")
    h.accept_turn()
    tokens(h, "turn-1", breakdown(100), breakdown(100))
    h.complete_turn("thread-1")
    [read] = cost_reads(h)
    h.codex_reply(
        read["id"],
        {
            "summary": {},
            "threadUsage": {
                "threadId": "thread-1",
                "estimatedUsageCreditsMicros": 1,
                "estimatedUsageUsdMicros": 3,
                "groups": [],
            },
        },
    )
    assert usage_updates(h)[-1]["cost"] == {"amount": 0.000003, "currency": "USD"}
    h.validate()
