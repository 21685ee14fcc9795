"""A command's kind, end to end: the real, pinned Codex asks for an escalated pipeline that it
parses as a mere search; the bridge shows it as ``execute`` wherever it shows it: the permission
request, the tool call and its updates, and a later ``session/load``'s replay.

A client that auto-approves reads and searches would otherwise have let ``rg -l hello . | xargs
rm`` delete files outside the sandbox without asking anyone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.scripted_model import ScriptedModel
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge
from tests.support.reading import Ended
from tests.support.scenarios.approvals import Answers

pytestmark = pytest.mark.e2e

PIPELINE = "rg -l hello . | xargs rm"
#: An escalated ``exec_command``: Codex asks before running it outside the sandbox.
ESCALATED_PIPELINE = (
    "@@ call exec_command "
    + json.dumps(
        {"cmd": PIPELINE, "sandbox_permissions": "require_escalated", "justification": "test"}
    )
    + "\n@@ then\n@@ say done"
)


def kinds(received: list[dict[str, Any]], tool_call_id: str) -> list[tuple[str, str]]:
    """Each ``tool_call`` / ``tool_call_update`` the client was sent for this tool call that
    says a kind, and the kind it says."""
    return [
        (update["sessionUpdate"], update["kind"])
        for m in received
        if m.get("method") == "session/update"
        for update in [m["params"]["update"]]
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update")
        and update.get("toolCallId") == tool_call_id
        and "kind" in update
    ]


async def test_a_pipeline_codex_calls_a_search_is_execute_in_its_request_and_transcript(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    scripted_model: ScriptedModel,
) -> None:
    # Allowed, so that it runs and Codex stores it (a declined command is not kept): in the
    # test's workspace, where nothing matches.
    answers = Answers(permission="allow_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(
            bridge_argv, bridge_env, stderr_file, on_request=answers
        ) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, ESCALATED_PIPELINE) == Ended({"stopReason": "end_turn"})
    [request] = answers.asked_for("session/request_permission")
    tool_call = request["toolCall"]
    assert tool_call["title"] == PIPELINE
    # What Codex made of the line: one search (the xargs stage is dropped from its parse).
    assert [a["type"] for a in tool_call["rawInput"]["commandActions"]] == ["search"]
    assert tool_call["kind"] == "execute"
    # The transcript says the same: the tool call, and its final update once it ran.
    shown = kinds(client.received, tool_call["toolCallId"])
    assert shown[0] == ("tool_call", "execute") and shown[-1][0] == "tool_call_update"
    assert {kind for _, kind in shown} == {"execute"}
    assert client.text_of(sid).endswith("done")
    assert_valid_acp(client)

    # A later client loading the session is shown the stored command the same way.
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as later:
            await later.initialize()
            await later.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
    replayed = kinds(later.received, tool_call["toolCallId"])
    assert replayed and {kind for _, kind in replayed} == {"execute"}, replayed
    assert_valid_acp(later)
