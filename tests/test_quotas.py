"""ACP's quotas proposal over Codex's usage windows, at the engine (shapes: the proposal's
fragment, tests/schemas/acp-proposals)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.acp import v2
from bridge.engine.features.extensions._quotas import duration
from bridge.jsonrpc.peer import ErrorObject

from .support.acp_schema import validate_proposal
from .support.engine_harness import Harness
from .support.proposals import Client

RESETS = 1_800_000_000  # 2027-01-15T08:00:00Z
NOW = 1_799_990_000


def limits(used: float, **more: Any) -> dict[str, Any]:
    window = {"usedPercent": used, "windowDurationMins": 300, "resetsAt": RESETS}
    return {"rateLimits": {"limitId": "codex", "primary": window, **more}}


def client(version: int, session: dict[str, Any] | None) -> Client:
    return Client(version, {"session": session} if session is not None else {})


def answer_clock(h: Harness, seconds: int = NOW) -> None:
    while h.clock_reads:
        h._collect(h.engine.clock_read(h.clock_reads.pop(0), seconds))


def quota_updates(h: Harness) -> list[dict[str, Any]]:
    return [u for u in h.updates() if u["sessionUpdate"] == "quota_update"]


@pytest.mark.parametrize("version", [1, 2])
def test_windows_are_pushed_as_pools_read_on_demand_and_a_spent_one_refuses(
    version: int,
) -> None:
    h = client(version, {"quota": {}})
    caps = h.init["capabilities" if version == 2 else "agentCapabilities"]
    assert caps["quota"] == {}
    sid = h.new_session()
    h.codex_notify("account/rateLimits/updated", limits(42))
    assert not quota_updates(h)  # stamped first: the shell reads the clock
    answer_clock(h)
    (update,) = quota_updates(h)
    validate_proposal("QuotaUpdate", update)
    assert update == {
        "sessionUpdate": "quota_update",
        "updatedAt": "2027-01-15T05:13:20.000Z",
        "pools": [
            {
                "id": "codex",
                "meters": [
                    {
                        "id": "primary",
                        "usedPercent": 42,
                        "window": "PT5H",
                        "resetsAt": "2027-01-15T08:00:00Z",
                    }
                ],
            }
        ],
    }
    # The same windows again: nothing new to say.
    h.codex_notify("account/rateLimits/updated", limits(42))
    answer_clock(h)
    assert len(quota_updates(h)) == 1

    # quota/read asks Codex for every limit; unchanged data keeps its time.
    rid = h.client_request("quota/read", {"sessionId": sid})
    read = h.codex_request("account/rateLimits/read")
    h.codex_reply(read["id"], {"rateLimits": limits(42)["rateLimits"]})
    answer_clock(h)
    result = h.result(rid)
    validate_proposal("QuotaSnapshot", result)
    assert result == {"updatedAt": update["updatedAt"], "pools": update["pools"]}

    # Spent in the same second: a later time, the meter exceeded, the pool exhausted.
    h.codex_notify("account/rateLimits/updated", limits(100))
    answer_clock(h)
    spent = quota_updates(h)[-1]
    assert spent["updatedAt"] == "2027-01-15T05:13:20.001Z"
    assert spent["pools"][0]["state"] == "exhausted"
    assert spent["pools"][0]["meters"][0]["status"] == "exceeded"

    prompt = h.client_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    )
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    if version == 2:
        item = {"type": "userMessage", "id": "um-turn-1", "content": []}
        h.codex_notify("item/started", {"threadId": sid, "turnId": "turn-1", "item": item})
    h.complete_turn(
        sid,
        status="failed",
        error={"message": "You've hit your usage limit.", "codexErrorInfo": "usageLimitExceeded"},
    )
    error: ErrorObject | v2.Error
    if version == 1:
        error = h.error(prompt)
    else:
        (ended,) = [u for u in h.updates(sid) if u.get("state") == "idle"]
        idle = msgspec.convert(ended, v2.StateUpdate)
        assert isinstance(idle.error, v2.Error), ended
        error = idle.error
    assert error.code == -32003
    assert error.message == "You've hit your usage limit."
    validate_proposal("QuotaExceededErrorData", error.data)
    assert error.data["poolId"] == "codex" and error.data["meterId"] == "primary"
    assert error.data["resetsAt"] == "2027-01-15T08:00:00Z"
    assert error.data["codexErrorInfo"] == "usageLimitExceeded"  # Codex's own, kept
    h.validate()


@pytest.mark.parametrize("version", [1, 2])
def test_a_client_that_declares_nothing_is_told_nothing(version: int) -> None:
    h = client(version, None)
    caps = h.init["capabilities" if version == 2 else "agentCapabilities"]
    assert "quota" not in caps
    sid = h.new_session()
    h.codex_notify("account/rateLimits/updated", limits(42))
    assert not h.clock_reads and not quota_updates(h)
    rid = h.client_request("quota/read", {})
    assert h.error(rid).code == -32601
    prompt = h.start_prompt(sid) if version == 1 else None
    if prompt is not None:
        h.complete_turn(
            sid, status="failed", error={"message": "x", "codexErrorInfo": "usageLimitExceeded"}
        )
        assert h.error(prompt).code == -32603


def test_a_read_codex_cannot_answer_is_an_empty_snapshot() -> None:
    h = client(1, {"quota": {}})
    rid = h.client_request("quota/read", None)
    read = h.codex_request("account/rateLimits/read")
    h.codex_error(read["id"], "chatgpt authentication required to read rate limits")
    answer_clock(h)
    result = h.result(rid)
    validate_proposal("QuotaSnapshot", result)
    assert result["pools"] == []
    h.validate()


@pytest.mark.parametrize(
    ("minutes", "iso"), [(300, "PT5H"), (10080, "P7D"), (90, "PT1H30M"), (45, "PT45M"), (0, "PT0M")]
)
def test_window_lengths_are_iso_durations(minutes: int, iso: str) -> None:
    assert duration(minutes) == iso


def usage(thread: str, turn: str, last: dict[str, int], total: dict[str, int]) -> dict[str, Any]:
    return {"threadId": thread, "turnId": turn, "tokenUsage": {"last": last, "total": total}}


def test_a_v1_prompt_answer_carries_the_tokens_its_turn_used_as_the_typescript_adapter() -> None:
    h = client(1, {"quota": {}})
    h.thread_started("/work", "gpt-test", {"type": "workspaceWrite"})
    sid = "thread-1"
    # The thread had used 1,000 tokens before; two model requests, the second's count
    # repeated unchanged (Codex does when the usage limits change): not counted twice.
    before = {"totalTokens": 1000, "inputTokens": 800, "cachedInputTokens": 300}
    first = {"totalTokens": 120, "inputTokens": 100, "cachedInputTokens": 40, "outputTokens": 20}
    after_first = {"totalTokens": 1120, "inputTokens": 900, "cachedInputTokens": 340}
    after_first |= {"outputTokens": 20}
    second = {"totalTokens": 30, "inputTokens": 25, "outputTokens": 5, "reasoningOutputTokens": 2}
    after_second = {"totalTokens": 1150, "inputTokens": 925, "cachedInputTokens": 340}
    after_second |= {"outputTokens": 25, "reasoningOutputTokens": 2}
    h.codex_notify("thread/tokenUsage/updated", usage(sid, "turn-0", before, before))
    rid = h.start_prompt(sid)
    h.codex_notify("thread/tokenUsage/updated", usage(sid, "turn-1", first, after_first))
    h.codex_notify("thread/tokenUsage/updated", usage(sid, "turn-1", second, after_second))
    h.codex_notify("thread/tokenUsage/updated", usage(sid, "turn-1", second, after_second))
    h.complete_turn(sid)
    counted = {
        "totalTokens": 150,
        "inputTokens": 125,
        "cachedInputTokens": 40,
        "outputTokens": 25,
        "reasoningOutputTokens": 2,
    }
    answer = h.result(rid)
    answer.pop("usage")  # the turn's tokens as ACP counts them (tests/test_turn_usage.py)
    assert answer == {
        "stopReason": "end_turn",
        "_meta": {
            "quota": {
                "token_count": counted,
                "model_usage": [{"model": "gpt-test", "token_count": counted}],
            }
        },
    }
    h.validate()
    # Tokens of no prompt (between prompts) are no prompt's; a prompt Codex reported
    # nothing for says so.
    h.codex_notify("thread/tokenUsage/updated", usage(sid, "turn-x", first, after_first))
    rid = h.start_prompt(sid, turn_id="turn-2")
    h.complete_turn(sid, turn_id="turn-2")
    quota = h.result(rid)["_meta"]["quota"]
    assert quota == {"token_count": None, "model_usage": []}


def test_a_client_that_declares_nothing_gets_a_bare_prompt_answer() -> None:
    h = client(1, None)
    sid = h.new_session()
    rid = h.start_prompt(sid)
    h.codex_notify(
        "thread/tokenUsage/updated", usage(sid, "turn-1", {"totalTokens": 5}, {"totalTokens": 5})
    )
    h.complete_turn(sid)
    answer = h.result(rid)
    assert answer["stopReason"] == "end_turn" and "_meta" not in answer
