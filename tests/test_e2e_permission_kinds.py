"""The kind of a permission request, end to end: the real, pinned Codex asks for an escalated
pipeline that it parses as a mere search; the bridge asks the client with kind ``execute``.

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


def tool_calls(received: list[dict[str, Any]], tool_call_id: str) -> list[dict[str, Any]]:
    """The ``tool_call`` updates the client was sent for this tool call."""
    return [
        m["params"]["update"]
        for m in received
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "tool_call"
        and m["params"]["update"].get("toolCallId") == tool_call_id
    ]


async def test_an_escalated_pipeline_codex_calls_a_search_is_asked_for_as_execute(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    scripted_model: ScriptedModel,
) -> None:
    (workspace / "hello.txt").write_text("hello\n")
    answers = Answers(permission="reject_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(
            bridge_argv, bridge_env, stderr_file, on_request=answers
        ) as client:
            await client.initialize()
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, ESCALATED_PIPELINE) == {"stopReason": "end_turn"}
    [request] = answers.asked_for("session/request_permission")
    tool_call = request["toolCall"]
    assert tool_call["title"] == PIPELINE
    # What Codex made of the line: one search (the xargs stage is dropped from its parse).
    assert [a["type"] for a in tool_call["rawInput"]["commandActions"]] == ["search"]
    assert tool_call["kind"] == "execute"
    # The tool call itself keeps Codex's descriptive kind.
    [announced] = tool_calls(client.received, tool_call["toolCallId"])
    assert announced["kind"] == "search"
    assert (workspace / "hello.txt").read_text() == "hello\n"  # rejected: nothing deleted
    assert client.text_of(sid).endswith("done")
    assert_valid_acp(client)
