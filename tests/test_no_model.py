"""A turn whose model Codex cannot reach: told, bounded, answered with the reason (engine only).

The Codex messages are 0.169's (see tests/test_e2e_no_model.py for the real thing).
"""

from __future__ import annotations

from tests.support.engine_harness import Harness
from tests.test_v2 import V2

THREAD = "thread-1"


def retrying(
    h: Harness, message: str, details: str = "Connection failed: error sending request"
) -> None:
    h.codex_notify(
        "error",
        {
            "threadId": THREAD,
            "turnId": "turn-1",
            "willRetry": True,
            "error": {
                "message": message,
                "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
                "additionalDetails": details,
            },
        },
    )


def prompt(h: Harness) -> int:
    h.new_session(THREAD)
    return h.start_prompt(THREAD)


def methods(h: Harness) -> list[str]:
    return [m["method"] for m in h.to_codex if "method" in m and "id" in m]


def test_nobody_signed_in_stops_the_turn_and_answers_auth_required_after_its_updates() -> None:
    h = Harness()
    rid = prompt(h)
    retrying(h, "Reconnecting... 2/5")
    # The client is told at once (a thought: this client takes no notices).
    [told] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "agent_thought_chunk"]
    assert "Reconnecting... 2/5: Connection failed" in told["content"]["text"]
    read = h.codex_request("account/read")
    h.codex_reply(read["id"], {"account": None, "requiresOpenaiAuth": True})
    interrupt = h.codex_request("turn/interrupt")
    assert interrupt["params"] == {"threadId": THREAD, "turnId": "turn-1"}
    assert h.client_response(rid) is None  # answered once Codex ends the turn
    h.complete_turn(THREAD, status="interrupted")
    error = h.error(rid)
    assert error.code == -32000 and "not signed in" in error.message
    # Further retries of the same turn ask nothing more.
    assert methods(h).count("account/read") == 1


def test_a_signed_in_codex_waits_through_its_budget_then_fails_naming_the_provider() -> None:
    h = Harness()
    rid = prompt(h)
    retrying(h, "Reconnecting... 2/5")
    h.codex_reply(
        h.codex_request("account/read")["id"],
        {"account": {"type": "apiKey"}, "requiresOpenaiAuth": True},
    )
    for n in (3, 4, 5):
        retrying(h, f"Reconnecting... {n}/5")
    retrying(h, "Reconnecting... waiting for network")
    assert "turn/interrupt" not in methods(h) and "config/read" not in methods(h)
    retrying(h, "Reconnecting... waiting for network")
    config = h.codex_request("config/read")
    assert config["params"] == {"cwd": "/work"}
    h.codex_reply(
        config["id"],
        {
            "config": {
                "model_provider": "mock",
                "model_providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
            }
        },
    )
    h.codex_request("turn/interrupt")
    h.complete_turn(THREAD, status="interrupted")
    error = h.error(rid)
    assert error.code == -32603
    assert "could not reach its model provider 'mock' at http://127.0.0.1:9/v1" in error.message
    assert error.data["modelProvider"] == "mock" and error.data["willRetry"] is True


def test_a_cancel_after_the_bridge_stopped_the_turn_is_still_a_cancel() -> None:
    h = Harness()
    rid = prompt(h)
    retrying(h, "Reconnecting... waiting for network")
    h.codex_reply(
        h.codex_request("account/read")["id"], {"account": None, "requiresOpenaiAuth": True}
    )
    h.client_notify("session/cancel", {"sessionId": THREAD})
    h.complete_turn(THREAD, status="interrupted")
    assert h.result(rid) == {"stopReason": "cancelled"}


def test_a_provider_this_bridge_picks_is_not_judged_by_the_configured_ones_sign_in() -> None:
    h = Harness(thread_config={"model_provider": "local"})
    prompt(h)
    retrying(h, "Reconnecting... 2/5")
    assert "account/read" not in methods(h)


def test_a_client_that_takes_notices_gets_one_per_retry() -> None:
    h = Harness()
    h.client_request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}
    )
    prompt(h)
    retrying(h, "Reconnecting... 2/5")
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "warning" and "Reconnecting... 2/5" in notice["description"]


def test_v2_the_stopped_turn_ends_idle_with_auth_required_once() -> None:
    h = V2()
    h.new_session()
    rid = h.prompt(THREAD)
    h.accept_turn()
    retrying(h, "Reconnecting... 2/5")
    h.codex_reply(
        h.codex_request("account/read")["id"], {"account": None, "requiresOpenaiAuth": True}
    )
    h.complete_turn(THREAD, status="interrupted")
    assert h.result(rid) == {"messageId": "um-turn-1"}
    idle = [s for s in h.states(THREAD) if s["state"] == "idle"]
    assert len(idle) == 1 and idle[0]["stopReason"] == "error", idle
    assert idle[0]["error"]["code"] == -32000
    # The retry was told: a notice (v2 clients take them).
    assert any(u["sessionUpdate"] == "notice" for u in h.updates(THREAD))
    h.validate()
