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
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios.approvals import Answers
from tests.support.scenarios.subagents import NO_SUBAGENTS, call, script, spawn, wait
from tests.test_e2e_cancel_commands import command_runs, until

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
    open_conversation: OpenConversation, workspace: Path
) -> None:
    (workspace / "child-0.txt").mkdir()  # writing to it fails: "Is a directory", exit 1
    answers = Answers(permission="allow_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=NO_SUBAGENTS, on_request=answers) as talk:
            result = await talk.prompt(child_runs("echo hi > child-0.txt"))
    client, session = talk.client, talk.sid
    assert result == Ended({"stopReason": "end_turn"})
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
    assert talk.validated[0] > 0


async def test_a_hidden_childs_allowed_command_ends_completed_only_once_it_finished(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    target = workspace / "child-ok.txt"
    answers = Answers(permission="allow_once")
    #: Whether the command's file existed when each tool call status arrived.
    seen: list[tuple[str, str, bool]] = []

    def watch(method: str, params: Any) -> None:
        update = params.get("update", {}) if method == "session/update" else {}
        if update.get("sessionUpdate") == "tool_call_update" and "status" in update:
            seen.append((update["toolCallId"], update["status"], target.exists()))

    options: dict[str, Any] = {"on_request": answers, "on_notification": watch}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=NO_SUBAGENTS, **options) as talk:
            result = await talk.prompt(child_runs("sleep 2; echo hi > child-ok.txt"))
    client, session = talk.client, talk.sid
    assert result == Ended({"stopReason": "end_turn"})
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
    assert talk.validated[0] > 0


@pytest.mark.acp_versions(1, 2)
async def test_a_cancelled_commands_last_update_comes_before_the_work_ends(
    open_conversation: OpenConversation, acp_version: int
) -> None:
    """In v1 before the prompt's ``cancelled`` answer; in v2 before the ``idle`` state."""
    v2 = acp_version == 2
    # A command of each version's own, told apart from the other's in the process table.
    seconds = 59 if v2 else 57
    command = f"sleep {seconds}"
    ended: list[Any] = []

    async def prompt(client: AcpClient, session: str) -> None:
        text = script(
            call("exec_command", {"cmd": command, "yield_time_ms": 60_000}), "@@ say done"
        )
        ended.append(
            (await client.prompt_v2(session, text))[1] if v2 else await client.prompt(session, text)
        )

    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, client, session)
                started = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate")
                        == ("tool_call_update" if v2 else "tool_call")
                        and command in json.dumps(m["params"]["update"])
                    )
                )
                tool_call_id = started["params"]["update"]["toolCallId"]
                await until(lambda: command_runs(seconds), "the command runs")
                await client.notify("session/cancel", {"sessionId": session})
            # What arrives after the end (Codex's late word on the command) would show here.
            await talk.said("@@ say still here")
    if v2:
        assert [state["stopReason"] for state in ended] == ["cancelled"]
        [ended_at] = [
            n
            for n, m in enumerate(client.received)
            if m.get("method") == "session/update"
            and m["params"]["update"].get("stopReason") == "cancelled"
        ]
    else:
        assert ended == [Ended({"stopReason": "cancelled"})]
        [ended_at] = [
            n
            for n, m in enumerate(client.received)
            if m.get("result") == Ended({"stopReason": "cancelled"})
        ]
    updates = [
        (n, m["params"]["update"])
        for n, m in enumerate(client.received)
        if m.get("method") == "session/update"
        and m["params"]["update"].get("toolCallId") == tool_call_id
    ]
    assert [n for n, _ in updates if n > ended_at] == []
    assert updates[-1][1]["status"] == "failed"
    assert talk.validated[0] > 0
