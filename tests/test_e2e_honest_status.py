"""What a tool call says happened is what happened, in the order it happened, against the real,
pinned Codex.

- A hidden sub-agent's command (a client without ``subagents``) is asked on the root and shown
  there; once allowed, the command's own item says how it ended: ``failed`` when it exits 1,
  ``completed`` only once it really finished, never ``completed`` at the moment it is allowed.
- A cancelled prompt's tool calls reach their final status before the ``cancelled`` answer:
  Codex reports the interrupted command only after the turn's end, and ACP's prompt turn ends
  with its answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge
from tests.support.scenarios import open_session
from tests.support.scenarios.approvals import Answers
from tests.support.scenarios.subagents import NO_SUBAGENTS, call, script, spawn, wait

pytestmark = pytest.mark.e2e


def escalated(command: str) -> str:
    return call(
        "exec_command",
        {"cmd": command, "sandbox_permissions": "require_escalated", "justification": "needed"},
    )


def child_runs(command: str) -> str:
    """The root spawns a child that runs ``command`` (escalated, so asked), then waits for it."""
    return script(spawn(script(escalated(command), "@@ say child done")), wait(), "@@ say done")


def tool_call_statuses(client: AcpClient, session: str, tool_call_id: str) -> list[str]:
    return [
        p["update"]["status"]
        for p in client.updates
        if p["sessionId"] == session
        and p["update"].get("toolCallId") == tool_call_id
        and "status" in p["update"]
    ]


def asked_tool_call(answers: Answers) -> dict[str, Any]:
    [params] = answers.asked_for("session/request_permission")
    return params["toolCall"]  # type: ignore[no-any-return]


async def test_a_hidden_childs_allowed_command_that_fails_ends_failed_with_its_exit_code(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    (workspace / "child-0.txt").mkdir()  # writing to it fails: "Is a directory", exit 1
    answers = Answers(permission="allow_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            client.on_request = answers
            session = await open_session(client, str(workspace), NO_SUBAGENTS)
            result = await client.prompt(session, child_runs("echo hi > child-0.txt"))
    assert result == {"stopReason": "end_turn"}
    tool_call = asked_tool_call(answers)
    statuses = tool_call_statuses(client, session, tool_call["toolCallId"])
    assert "completed" not in statuses
    assert statuses[-1] == "failed", statuses
    final = [
        p["update"]
        for p in client.updates
        if p["update"].get("toolCallId") == tool_call["toolCallId"]
    ][-1]
    assert final["rawOutput"]["exitCode"] == 1
    assert final["title"].endswith("echo hi > child-0.txt")  # the agent's name, then the command
    assert assert_valid_acp(client) > 0


async def test_a_hidden_childs_allowed_command_ends_completed_only_once_it_finished(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    target = workspace / "child-ok.txt"
    answers = Answers(permission="allow_once")
    #: Whether the command's file existed when each tool call status arrived.
    seen: list[tuple[str, str, bool]] = []

    def watch(method: str, params: Any) -> None:
        update = params.get("update", {}) if method == "session/update" else {}
        if update.get("sessionUpdate") == "tool_call_update" and "status" in update:
            seen.append((update["toolCallId"], update["status"], target.exists()))

    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            client.on_request = answers
            client.on_notification = watch
            session = await open_session(client, str(workspace), NO_SUBAGENTS)
            command = "sleep 2; echo hi > child-ok.txt"
            result = await client.prompt(session, child_runs(command))
    assert result == {"stopReason": "end_turn"}
    assert target.read_text() == "hi\n"
    tool_call = asked_tool_call(answers)
    statuses = tool_call_statuses(client, session, tool_call["toolCallId"])
    assert statuses[-1] == "completed", statuses
    assert statuses.count("completed") == 1
    # Its completion came once the command had written the file (two seconds after the allow).
    ours = [
        (status, written) for call_id, status, written in seen if call_id == tool_call["toolCallId"]
    ]
    assert ours[-1] == ("completed", True), ours
    assert ("completed", False) not in ours, ours
    # The prefix option shows the command as the user reads it, not in its shell wrapper.
    [request] = answers.asked_for("session/request_permission")
    names = [option["name"] for option in request["options"]]
    assert not [name for name in names if "bash" in name], names
    assert assert_valid_acp(client) > 0


async def test_a_cancelled_commands_last_update_comes_before_the_cancelled_answer(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    result: list[Any] = []

    async def prompt(client: AcpClient, session: str) -> None:
        command = call("exec_command", {"cmd": "sleep 57", "yield_time_ms": 60_000})
        result.append(await client.prompt(session, script(command, "@@ say done")))

    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            session = await open_session(client, str(workspace))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, client, session)
                started = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate") == "tool_call"
                        and "sleep 57" in json.dumps(m["params"]["update"])
                    )
                )
                tool_call_id = started["params"]["update"]["toolCallId"]
                await trio.sleep(0.5)  # the command runs
                await client.notify("session/cancel", {"sessionId": session})
            # What arrives after the answer (Codex's late word on the command) would show here.
            await client.prompt(session, "@@ say still here")
    assert result == [{"stopReason": "cancelled"}]
    [answer_at] = [
        n for n, m in enumerate(client.received) if m.get("result") == {"stopReason": "cancelled"}
    ]
    updates = [
        (n, m["params"]["update"])
        for n, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == tool_call_id
    ]
    assert [n for n, _ in updates if n > answer_at] == []
    assert updates[-1][1]["status"] == "failed"
    assert assert_valid_acp(client) > 0


async def test_v2_a_cancelled_commands_last_update_comes_before_the_idle_state(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    ended: list[Any] = []

    async def prompt(client: AcpClient, session: str) -> None:
        command = call("exec_command", {"cmd": "sleep 59", "yield_time_ms": 60_000})
        ended.append((await client.prompt_v2(session, script(command, "@@ say done")))[1])

    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize_v2()
            session = await client.new_session(str(workspace))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, client, session)
                started = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate") == "tool_call_update"
                        and "sleep 59" in json.dumps(m["params"]["update"])
                    )
                )
                tool_call_id = started["params"]["update"]["toolCallId"]
                await trio.sleep(0.5)  # the command runs
                await client.notify("session/cancel", {"sessionId": session})
            # What arrives after the idle state (Codex's late word on the command) would show here.
            _, again = await client.prompt_v2(session, "@@ say still here")
    assert [state["stopReason"] for state in ended] == ["cancelled"]
    assert again["stopReason"] == "end_turn"
    [idle_at] = [
        n
        for n, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("stopReason") == "cancelled"
    ]
    updates = [
        (n, m["params"]["update"])
        for n, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == tool_call_id
    ]
    assert [n for n, _ in updates if n > idle_at] == []
    assert updates[-1][1]["status"] == "failed"
    assert assert_valid_acp(client, unstable=True, version=2) > 0
