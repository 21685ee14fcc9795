"""A tool call's status says what really happened, and no update of a turn follows its answer
(the engine alone).

- A command waiting for approval is ``pending`` (ACP: awaiting approval), ``in_progress`` once
  allowed; its own item ends it.
- A hidden sub-agent's command asked on the root is followed there by its item: output, final
  status and exit code. Declined, it ends ``failed`` at once; a request with no item (a
  permissions grant) ends ``completed`` when granted.
- A turn that ends interrupted ends its tool calls still open before the prompt's answer;
  Codex's late completion of them is dropped.
- The prefix option shows Codex's proposed rule without the shell wrapper.
"""

from __future__ import annotations

from typing import Any

from tests.support.engine_harness import Harness
from tests.test_approvals import (
    COMMAND_APPROVAL,
    asked,
    assert_valid_acp,
    codex_asks,
    harness,
    pick,
)
from tests.test_subagents import CHILD, ROOT, ROOT_TURN, Tree

THREAD = "thread-1"


def command(item_id: str, status: str, exit_code: int | None = None) -> dict[str, Any]:
    return {
        "type": "commandExecution",
        "id": item_id,
        "command": "/bin/bash -lc 'touch x'",
        "cwd": "/work",
        "status": status,
        "commandActions": [],
        "exitCode": exit_code,
        "aggregatedOutput": None if status == "inProgress" else "out\n",
    }


def item(h: Harness, event: str, thread: str, body: dict[str, Any], turn: str = "turn-1") -> None:
    h.codex_notify(f"item/{event}", {"threadId": thread, "turnId": turn, "item": body})


def statuses(h: Harness, session: str, call_id: str) -> list[str]:
    return [
        u["status"] for u in h.updates(session) if u.get("toolCallId") == call_id and "status" in u
    ]


# -- a command that waits for approval ------------------------------------------------------------


def root_cancelled_first(version: int = 1) -> Tree:
    """A root with a running child, cancelled; Codex has ended the root's turn, not yet the
    child's."""
    t = Tree(version=version)
    t.spawn()
    t.cancel(ROOT)
    t.turn_completed(ROOT, ROOT_TURN, "interrupted")
    return t


def test_a_command_waiting_for_approval_is_pending_then_in_progress_once_allowed() -> None:
    h, _ = harness()
    item(h, "started", THREAD, command("call_1", "inProgress"))
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    assert statuses(h, THREAD, "call_1") == ["in_progress", "pending"]
    # The pending update comes before the question.
    kinds = [m.get("method") for m in h.to_client]
    assert kinds[-2:] == ["session/update", "session/request_permission"]
    pick(h, "allow_once")
    assert statuses(h, THREAD, "call_1") == ["in_progress", "pending", "in_progress"]
    item(h, "completed", THREAD, command("call_1", "completed", 0))
    assert statuses(h, THREAD, "call_1")[-1] == "completed"


def test_a_declined_command_is_ended_by_its_item_not_by_the_answer() -> None:
    h, _ = harness()
    item(h, "started", THREAD, command("call_1", "inProgress"))
    codex_asks(h, 0, "item/commandExecution/requestApproval", COMMAND_APPROVAL)
    pick(h, "reject_once")
    assert statuses(h, THREAD, "call_1") == ["in_progress", "pending"]
    item(h, "completed", THREAD, command("call_1", "declined"))
    assert statuses(h, THREAD, "call_1")[-1] == "failed"


# -- a hidden sub-agent's command, shown on the root ----------------------------------------------------


def hidden_child_asks() -> tuple[Tree, dict[str, Any]]:
    t = Tree(subagents=False)
    t.spawn()
    item(t.h, "started", CHILD, command("call_cmd", "inProgress"), "turn-child")
    t.approval(CHILD, rid=2)
    [request] = t.permission_requests()
    assert request["params"]["sessionId"] == ROOT
    return t, request


def test_a_hidden_childs_allowed_command_follows_its_item_on_the_root_and_fails_with_it() -> None:
    t, request = hidden_child_asks()
    assert statuses(t.h, ROOT, "call_cmd") == ["pending"]
    t.answer(request, "allow_once")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "in_progress"]
    t.notify(
        "item/commandExecution/outputDelta",
        {"threadId": CHILD, "turnId": "turn-child", "itemId": "call_cmd", "delta": "Is a dir"},
    )
    [output] = [u for u in t.h.updates(ROOT) if u.get("content") and u["toolCallId"] == "call_cmd"]
    assert "Is a dir" in output["content"][0]["content"]["text"]
    item(t.h, "completed", CHILD, command("call_cmd", "failed", 1), "turn-child")
    final = [u for u in t.h.updates(ROOT) if u.get("toolCallId") == "call_cmd"][-1]
    assert final["status"] == "failed"
    assert final["rawOutput"]["exitCode"] == 1
    assert final["title"] == "Ada: touch x"
    assert "completed" not in statuses(t.h, ROOT, "call_cmd")
    # Followed no more once complete: nothing of the child reaches the client after.
    count = len(t.h.to_client)
    item(t.h, "completed", CHILD, command("call_cmd", "completed", 0), "turn-child")
    assert CHILD not in str(t.h.to_client[count:])
    t.check()


def test_a_hidden_childs_declined_command_ends_failed_at_once_and_is_followed_no_more() -> None:
    t, request = hidden_child_asks()
    t.answer(request, "reject_once")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "failed"]
    item(t.h, "completed", CHILD, command("call_cmd", "declined"), "turn-child")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "failed"]
    t.check()


def test_a_hidden_childs_command_cut_short_by_its_turn_ends_failed_on_the_root() -> None:
    t, request = hidden_child_asks()
    t.answer(request, "allow_once")
    t.turn_completed(CHILD, "turn-child", "interrupted")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "in_progress", "failed"]
    t.check()


def test_a_hidden_childs_allowed_command_that_never_starts_ends_failed_with_its_turn() -> None:
    t = Tree(subagents=False)
    t.spawn()
    t.approval(CHILD, rid=2)  # no item/started of it
    [request] = t.permission_requests()
    t.answer(request, "allow_once")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending"]
    t.turn_completed(CHILD, "turn-child")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "failed"]
    t.check()


def test_a_terminal_clients_command_cut_short_ends_its_terminal_too() -> None:
    h, rid = harness({"_meta": {"terminal_output": True}})
    item(h, "started", THREAD, command("call_1", "inProgress"))
    h.client_notify("session/cancel", {"sessionId": THREAD})
    h.complete_turn(THREAD, status="interrupted")
    final = [u for u in h.updates(THREAD) if u.get("toolCallId") == "call_1"][-1]
    assert final["status"] == "failed"
    assert final["content"][0] == {"type": "terminal", "terminalId": "call_1"}
    assert final["_meta"]["terminal_exit"] == {
        "terminal_id": "call_1",
        "exit_code": None,
        "signal": None,
    }
    assert h.result(rid) == {"stopReason": "cancelled"}
    assert_valid_acp(h)


def test_a_permissions_request_has_no_item_granted_it_ends_completed_denied_failed() -> None:
    for option, status in (("allow_once", "completed"), ("reject_once", "failed")):
        h, _ = harness()
        params = {
            "threadId": THREAD,
            "turnId": "turn-1",
            "itemId": "perm_1",
            "reason": "r",
            "permissions": {"network": {"enabled": True}},
        }
        codex_asks(h, 0, "item/permissions/requestApproval", params)
        assert statuses(h, THREAD, "perm_1") == ["pending"]
        pick(h, option)
        assert statuses(h, THREAD, "perm_1") == ["pending", status]
        assert asked(h)["params"]["toolCall"]["toolCallId"] == "perm_1"


# -- the end of an interrupted turn ----------------------------------------------------------------


def test_an_interrupted_turn_ends_its_open_tool_calls_before_the_cancelled_answer() -> None:
    h, rid = harness()
    item(h, "started", THREAD, command("call_1", "inProgress"))
    h.codex_notify(
        "item/commandExecution/outputDelta",
        {"threadId": THREAD, "turnId": "turn-1", "itemId": "call_1", "delta": "half"},
    )
    h.client_notify("session/cancel", {"sessionId": THREAD})
    h.complete_turn(THREAD, status="interrupted")
    [answer_at] = [n for n, m in enumerate(h.to_client) if m.get("id") == rid]
    assert h.to_client[answer_at]["result"] == {"stopReason": "cancelled"}
    [closed_at] = [
        n
        for n, m in enumerate(h.to_client)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == "call_1"
        and m["params"]["update"].get("status") == "failed"
    ]
    assert closed_at < answer_at
    closed = h.to_client[closed_at]["params"]["update"]
    texts = [c["content"]["text"] for c in closed["content"]]
    assert "half" in texts[0] and texts[-1] == "The turn was cancelled before this finished."
    # Codex's word on the killed command comes after the answer: dropped.
    count = len(h.to_client)
    item(h, "completed", THREAD, command("call_1", "failed", -1))
    assert h.to_client[count:] == []


def test_a_cancelled_turn_ends_a_sub_agent_wait_codex_never_completes() -> None:
    t = Tree()
    t.spawn()
    t.collab_started("wait-1", "wait", CHILD)
    t.cancel(ROOT)
    t.turn_completed(CHILD, "turn-child", "interrupted")
    t.turn_completed(ROOT, "turn-root", "interrupted")
    [answer_at] = [n for n, m in enumerate(t.sent()) if m.get("id") == t.prompt]
    assert t.sent()[answer_at]["result"] == {"stopReason": "cancelled"}
    [closed_at] = [
        n
        for n, m in enumerate(t.sent())
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == "wait-1"
        and m["params"]["update"].get("status") == "failed"
    ]
    assert closed_at < answer_at
    t.check()


def test_a_completed_turn_leaves_a_command_still_running_to_its_item() -> None:
    h, rid = harness()
    item(h, "started", THREAD, command("call_1", "inProgress"))
    h.complete_turn(THREAD)
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert statuses(h, THREAD, "call_1") == ["in_progress"]
    item(h, "completed", THREAD, command("call_1", "completed", 0))
    assert statuses(h, THREAD, "call_1") == ["in_progress", "completed"]


# -- the prefix option -------------------------------------------------------------------------------


def prefix_option(amendment: list[str]) -> str:
    h, _ = harness()
    params = {**COMMAND_APPROVAL, "proposedExecpolicyAmendment": amendment}
    params["availableDecisions"] = None
    codex_asks(h, 0, "item/commandExecution/requestApproval", params)
    [name] = [o["name"] for o in asked(h)["params"]["options"] if o["optionId"] == "allow_prefix"]
    return name  # type: ignore[no-any-return]


def test_the_prefix_option_shows_codexs_rule_without_the_shell_wrapper() -> None:
    assert prefix_option(["touch", "approved.txt"]) == (
        "Always allow commands starting with `touch approved.txt`"
    )
    # A script Codex cannot read as simple commands: the rule matches that script only.
    assert prefix_option(["/bin/bash", "-lc", "echo hi > a.txt"]) == (
        "Always allow `echo hi > a.txt`"
    )
    assert prefix_option(["zsh", "-c", "make test"]) == "Always allow `make test`"


# -- a cancelled turn ends after the sub-agent turns its cancel stopped ----------------------------


def index_of(t: Tree, predicate: Any) -> int:
    [n] = [n for n, m in enumerate(t.sent()) if predicate(m)]
    return n


def child_idle(m: dict[str, Any]) -> bool:
    update = m.get("params", {}).get("update", {})
    return update.get("sessionId") == CHILD and update.get("state", {}).get("state") == "idle"


def test_a_cancelled_roots_answer_waits_for_its_childs_turn_to_end_when_codex_ends_it_first() -> (
    None
):
    t = root_cancelled_first()  # Codex ends the root's turn first
    assert t.h.client_response(t.prompt) is None
    t.turn_completed(CHILD, "turn-child", "interrupted")
    answer_at = index_of(t, lambda m: m.get("id") == t.prompt and "result" in m)
    assert t.sent()[answer_at]["result"] == {"stopReason": "cancelled"}
    assert index_of(t, child_idle) < answer_at
    t.check()


def test_a_cancelled_roots_answer_does_not_wait_for_a_child_whose_interrupt_was_refused() -> None:
    t = root_cancelled_first()
    assert t.h.client_response(t.prompt) is None
    [child_interrupt] = [
        m
        for m in t.h.to_codex
        if m.get("method") == "turn/interrupt" and m["params"]["threadId"] == CHILD
    ]
    t.h.codex_error(child_interrupt["id"], "no active turn")
    assert t.h.result(t.prompt) == {"stopReason": "cancelled"}
    t.check()


def test_v2_a_cancelled_roots_idle_state_follows_its_childs() -> None:
    t = root_cancelled_first(version=2)
    t.turn_completed(CHILD, "turn-child", "interrupted")

    def idle_of(session: str) -> Any:
        def match(m: dict[str, Any]) -> bool:
            params = m.get("params", {})
            update = params.get("update", {})
            return (
                params.get("sessionId") == session
                and update.get("sessionUpdate") == "state_update"
                and update.get("state") == "idle"
            )

        return match

    assert index_of(t, idle_of(CHILD)) < index_of(t, idle_of(ROOT))
    t.check()


def test_a_close_does_not_wait_for_the_cancelled_children_a_held_answer_waits_for() -> None:
    t = root_cancelled_first()
    assert t.h.client_response(t.prompt) is None
    rid = t.request("session/close", {"sessionId": ROOT})
    assert t.h.result(t.prompt) == {"stopReason": "cancelled"}
    unsubscribe = t.h.codex_request("thread/unsubscribe")
    t.h.codex_reply(unsubscribe["id"], {"status": "unsubscribed"})
    assert t.h.result(rid) == {}


def test_a_command_started_while_its_approval_waits_is_pending_until_allowed() -> None:
    t = Tree(subagents=False)
    t.spawn()
    t.approval(CHILD, rid=2)  # asked before its item started
    item(t.h, "started", CHILD, command("call_cmd", "inProgress"), "turn-child")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "pending"]
    [request] = t.permission_requests()
    t.answer(request, "allow_once")
    assert statuses(t.h, ROOT, "call_cmd") == ["pending", "pending", "in_progress"]
    t.check()
