"""Deleting a session, signing out, and the sign-in state, in ACP v1 and v2, over one
engine: ``session/delete`` (Codex's ``thread/delete``), ``logout`` / ``auth/logout``
(``account/logout``), ``auth/status`` and ``auth/status_update`` (``account/read``,
``account/updated``). Every message the engine sends is checked against the schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_harness import Harness, Windows
from tests.test_lifecycle import Recorder, initialize, validate_all
from tests.test_v2 import V2

NO_ROLLOUT = "no rollout found for thread id thread-9"

CHATGPT = {
    "type": "chatgpt",
    "email": "ada@example.com",
    "planType": "plus",
    "workspaceName": "Analytical Engines",
}


def deleted(h: Harness, thread_id: str = "thread-1") -> None:
    """What Codex sends every connection once it deleted ``thread_id``."""
    h.codex_notify(
        "thread/status/changed", {"threadId": thread_id, "status": {"type": "notLoaded"}}
    )
    h.codex_notify("thread/deleted", {"threadId": thread_id})


def prompt(h: Harness, session_id: str = "thread-1") -> int:
    return h.client_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
    )


# -- what is advertised ------------------------------------------------------------------------


def test_v1_advertises_delete_and_logout_and_the_sign_in_state_only_to_an_unstable_client() -> None:
    h = Recorder()
    caps = initialize(h)
    assert caps["sessionCapabilities"]["delete"] == {}
    assert caps["auth"] == {"logout": {}}
    # Nor is it told the state when it changes.
    h.codex_notify("account/updated", {"authMode": None, "planType": None})
    assert not [m for m in h.to_codex if m.get("method") == "account/read"]
    assert not _updates(h)
    validate_all(h)
    unstable = Recorder()
    caps = initialize(unstable, {"subagents": {}})
    assert caps["auth"] == {"logout": {}, "status": {}}
    validate_all(unstable, unstable=True)


def test_v2_advertises_the_sign_in_state_beside_delete() -> None:
    h = V2()
    capabilities = h.init["capabilities"]
    assert capabilities["auth"] == {"status": {}}
    assert capabilities["session"]["delete"] == {}
    h.validate()


# -- session/delete ----------------------------------------------------------------------------


def test_v1_delete_of_an_idle_session_forgets_it_and_a_load_then_asks_codex() -> None:
    h = Recorder()
    initialize(h)
    sid = h.new_session()
    rid = h.client_request("session/delete", {"sessionId": sid})
    assert h.codex_request("thread/delete")["params"] == {"threadId": sid}
    deleted(h)
    h.codex_reply(h.codex_request("thread/delete")["id"], {})
    assert h.result(rid) == {}
    # Gone here as it is in Codex: a prompt is not found, and a load is Codex's to answer.
    assert h.error(prompt(h, sid)).code == -32002
    load = h.client_request("session/load", {"sessionId": sid, "cwd": "/work", "mcpServers": []})
    h.codex_error(h.codex_request("thread/read")["id"], "thread not loaded: thread-1")
    assert h.error(load).code == -32002
    # Codex has no thread to unsubscribe from.
    assert not [m for m in h.to_codex if m.get("method") == "thread/unsubscribe"]
    validate_all(h)


def test_v1_delete_of_a_running_session_answers_its_prompt_cancelled_first() -> None:
    """Codex stops the turn of a thread it deletes (turn/completed ``interrupted``) before
    it says the thread is deleted, then answers the delete."""
    h = Recorder()
    initialize(h)
    sid = h.new_session()
    running = h.start_prompt(sid)
    queued = prompt(h, sid)
    rid = h.client_request("session/delete", {"sessionId": sid})
    h.complete_turn(sid, status="interrupted")
    assert h.result(running) == {"stopReason": "cancelled"}
    # The queued prompt went to Codex as the next turn, which the delete ends too.
    h.codex_error(h.codex_request("turn/start")["id"], NO_ROLLOUT)
    deleted(h)
    h.codex_reply(h.codex_request("thread/delete")["id"], {})
    assert h.result(rid) == {}
    assert h.client_response(queued) is not None
    validate_all(h)


def test_a_deleted_session_whose_turn_still_runs_is_cancelled_then_forgotten() -> None:
    h = Recorder()
    initialize(h)
    sid = h.new_session()
    running = h.start_prompt(sid)
    queued = prompt(h, sid)
    deleted(h)  # another window deleted it; its turn has not ended yet
    assert h.codex_request("turn/interrupt")["params"]["threadId"] == sid
    assert h.result(queued) == {"stopReason": "cancelled"}
    h.complete_turn(sid, status="interrupted")
    assert h.result(running) == {"stopReason": "cancelled"}
    assert h.error(prompt(h, sid)).code == -32002
    validate_all(h)


def test_a_session_deleted_in_another_window_is_gone_in_this_one() -> None:
    w = Windows()
    sid = w.a.new_session()
    w.open("session/resume")
    rid = w.a.client_request("session/delete", {"sessionId": sid})
    w.notify("thread/deleted", {"threadId": sid})
    w.a.codex_reply(w.a.codex_request("thread/delete")["id"], {})
    assert w.a.result(rid) == {}
    for window in w.both():
        error = window.error(prompt(window, sid))
        assert error.code == -32002 and sid in error.message


def test_a_prompt_that_races_another_windows_delete_is_not_found() -> None:
    """The prompt reached Codex before this window heard of the delete."""
    h = Recorder()
    initialize(h)
    sid = h.new_session()
    rid = prompt(h, sid)
    h.codex_error(h.codex_request("turn/start")["id"], f"thread not found: {sid}")
    error = h.error(rid)
    assert error.code == -32002 and sid in error.message and "deleted" in error.message
    validate_all(h)


@pytest.mark.parametrize("version", [1, 2])
def test_delete_of_a_session_codex_does_not_have_is_not_found(version: int) -> None:
    h: Harness = V2() if version == 2 else Recorder()
    if version == 1:
        initialize(h)  # type: ignore[arg-type]
    rid = h.client_request("session/delete", {"sessionId": "thread-9"})
    h.codex_error(h.codex_request("thread/delete")["id"], NO_ROLLOUT)
    error = h.error(rid)
    assert error.code == -32002
    assert "thread-9" in error.message and NO_ROLLOUT in error.message
    assert error.data == {"sessionId": "thread-9", "codex": NO_ROLLOUT}
    if isinstance(h, V2):
        h.validate()
    else:
        validate_all(h)  # type: ignore[arg-type]


def test_v2_delete_forgets_the_session_too() -> None:
    h = V2()
    sid = h.new_session()
    rid = h.client_request("session/delete", {"sessionId": sid})
    deleted(h)
    h.codex_reply(h.codex_request("thread/delete")["id"], {})
    assert h.result(rid) == {}
    assert h.error(h.prompt(sid)).code == -32002
    h.validate()


def test_deleting_a_root_stops_its_sub_agents_work_and_forgets_them() -> None:
    """Codex stops the deleted thread's own turn, not its sub-agents': the bridge stops
    them, as a close does (ACP's rule for a parent's work)."""
    from tests.test_subagents import CHILD, ROOT, ROOT_TURN, Tree

    t = Tree()
    t.spawn()
    rid = t.request("session/delete", {"sessionId": ROOT})
    t.turn_completed(ROOT, ROOT_TURN, status="interrupted")
    deleted(t.h, ROOT)
    assert {"threadId": CHILD, "turnId": "turn-child"} in t.interrupts()
    t.h.codex_reply(t.h.codex_request("thread/delete")["id"], {})
    assert t.h.result(rid) == {}
    assert CHILD not in t.h.engine.threads and ROOT not in t.h.engine.threads
    gone_at = len(t.sent())
    t.approval(CHILD, rid=9)  # the child asks on: declined, and nobody is shown it
    assert t.sent()[gone_at:] == []
    [answer] = t.answers_to_codex(9)
    assert answer["result"]["decision"] in ("decline", "cancel")
    t.check()


# -- logout ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "method"), [(1, "logout"), (2, "auth/logout")])
def test_logout_is_codexs_account_logout(version: int, method: str) -> None:
    h: Harness = V2() if version == 2 else Recorder()
    if version == 1:
        initialize(h)  # type: ignore[arg-type]
    rid = h.client_request(method, {})
    h.codex_reply(h.codex_request("account/logout")["id"], {})
    assert h.result(rid) == {}
    if isinstance(h, V2):
        h.validate()
    else:
        validate_all(h)  # type: ignore[arg-type]


# -- the sign-in state -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("account", "expected"),
    [
        (
            {"account": CHATGPT, "requiresOpenaiAuth": True},
            {
                "state": "authenticated",
                "accounts": [
                    {
                        "label": "ChatGPT (plus)",
                        "active": True,
                        "email": "ada@example.com",
                        "organization": "Analytical Engines",
                    }
                ],
            },
        ),
        (
            {"account": {"type": "apiKey"}, "requiresOpenaiAuth": True},
            {"state": "authenticated", "accounts": [{"label": "OpenAI API key", "active": True}]},
        ),
        ({"account": None, "requiresOpenaiAuth": True}, {"state": "unauthenticated"}),
        ({"account": None, "requiresOpenaiAuth": False}, {"state": "not_required"}),
    ],
    ids=["chatgpt", "api-key", "signed-out", "no-sign-in-needed"],
)
@pytest.mark.parametrize("version", [1, 2])
def test_auth_status_is_codexs_account(
    version: int, account: dict[str, Any], expected: dict[str, Any]
) -> None:
    h: Harness = V2() if version == 2 else Recorder()
    if version == 1:
        initialize(h, {"subagents": {}})  # type: ignore[arg-type]
    rid = h.client_request("auth/status", {})
    h.codex_reply(h.codex_request("account/read")["id"], account)
    assert h.result(rid) == expected
    if isinstance(h, V2):
        h.validate()
    else:
        validate_all(h, unstable=True)  # type: ignore[arg-type]


def test_auth_status_is_unknown_when_codex_cannot_read_the_account() -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request("auth/status", {})
    h.codex_error(h.codex_request("account/read")["id"], "auth storage unreadable", -32603)
    assert h.result(rid) == {"state": "unknown"}  # never auth_required: the client asks to learn
    validate_all(h, unstable=True)


def _updates(h: Harness) -> list[dict[str, Any]]:
    return [m["params"] for m in h.to_client if m.get("method") == "auth/status_update"]


@pytest.mark.parametrize("version", [1, 2])
def test_a_change_of_codexs_account_is_told_once(version: int) -> None:
    h: Harness = V2() if version == 2 else Recorder()
    if version == 1:
        initialize(h, {"subagents": {}})  # type: ignore[arg-type]
    asked = h.client_request("auth/status", {})
    h.codex_reply(
        h.codex_request("account/read")["id"], {"account": None, "requiresOpenaiAuth": True}
    )
    assert h.result(asked) == {"state": "unauthenticated"}
    # A sign-in (here, or in another window of a shared Codex): Codex tells every connection.
    h.codex_notify("account/updated", {"authMode": "apikey", "planType": None})
    h.codex_reply(
        h.codex_request("account/read")["id"],
        {"account": {"type": "apiKey"}, "requiresOpenaiAuth": True},
    )
    signed_in = {
        "state": "authenticated",
        "accounts": [{"label": "OpenAI API key", "active": True}],
    }
    assert _updates(h) == [signed_in]
    # The same state again is not news.
    reads = len([m for m in h.to_codex if m.get("method") == "account/read"])
    h.codex_notify("account/updated", {"authMode": "apikey", "planType": None})
    h.codex_reply(
        h.codex_request("account/read")["id"],
        {"account": {"type": "apiKey"}, "requiresOpenaiAuth": True},
    )
    assert len([m for m in h.to_codex if m.get("method") == "account/read"]) == reads + 1
    assert _updates(h) == [signed_in]
    # A sign-out.
    h.codex_notify("account/updated", {"authMode": None, "planType": None})
    h.codex_reply(
        h.codex_request("account/read")["id"], {"account": None, "requiresOpenaiAuth": True}
    )
    assert _updates(h) == [signed_in, {"state": "unauthenticated"}]
    if isinstance(h, V2):
        h.validate()
    else:
        validate_all(h, unstable=True)  # type: ignore[arg-type]
