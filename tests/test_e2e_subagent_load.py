"""session/load of a parent whose sub-agents Codex stored: the RFD's replay rules, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge
from tests.support.reading import Ended, calls_seen
from tests.support.scenarios import subagents as scenario

pytestmark = pytest.mark.e2e

CAPABILITIES = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "subagents": {},
}


def _call(name: str, args: dict[str, object]) -> str:
    return f"@@ call {name} {json.dumps(args)}"


# The root spawns a child that spawns a grandchild (and says so); the root waits for the child.
INNER = (
    _call("multi_agent_v1/spawn_agent", {"message": "@@ words 3"}) + "\n@@ then\n@@ say mid done"
)
PROMPT = "\n".join(
    [
        _call("multi_agent_v1/spawn_agent", {"message": INNER}),
        "@@ then",
        _call("multi_agent_v1/wait_agent", {"targets": ["{{agent_id}}"], "timeout_ms": 20000}),
        "@@ then",
        "@@ say parent done",
    ]
)


async def test_replay_after_restarting_the_adapter_with_complete_child_history(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    scripted_model: ScriptedModel,
    tmp_path: Path,
) -> None:
    home = tmp_path / "nested-home"
    home.mkdir()
    write_codex_home(home, scripted_model.base_url, extra_toml="[agents]\nmax_depth = 3")
    env = {**bridge_env, "CODEX_HOME": str(home)}
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, env, stderr_file) as first:
            await first.initialize(CAPABILITIES)
            root = await first.new_session(str(workspace))
            assert await first.prompt(root, PROMPT) == Ended({"stopReason": "end_turn"})
            await trio.sleep(1)  # let the grandchild finish writing its history
        announced = [
            u["update"]["sessionId"]
            for u in first.updates
            if u["update"]["sessionUpdate"] == "subagent_update" and "title" in u["update"]
        ]
        child, grandchild = announced

        async with running_bridge(bridge_argv, env, stderr_file) as client:
            await client.initialize(CAPABILITIES)
            await client.request(
                "session/load", {"sessionId": root, "cwd": str(workspace), "mcpServers": []}
            )
            # A new prompt on the loaded root works.
            assert await client.prompt(root, "@@ say again") == Ended({"stopReason": "end_turn"})

    messages = client.received
    response = next(
        i
        for i, m in enumerate(messages)
        if m.get("id") is not None and "result" in m and m["id"] == 1
    )

    def index(predicate) -> int:  # type: ignore[no-untyped-def]
        return next(
            i
            for i, m in enumerate(messages)
            if m.get("method") == "session/update" and predicate(m["params"])
        )

    child_announced = index(
        lambda p: (
            p["update"].get("sessionUpdate") == "subagent_update"
            and p["update"]["sessionId"] == child
            and "title" in p["update"]
        )
    )
    grandchild_announced = index(
        lambda p: (
            p["update"].get("sessionUpdate") == "subagent_update"
            and p["update"]["sessionId"] == grandchild
            and "title" in p["update"]
        )
    )
    child_history = index(lambda p: p["sessionId"] == child)
    grandchild_history = index(lambda p: p["sessionId"] == grandchild)
    # Associations precede each child's history, parent before child, all before the response.
    assert child_announced < child_history < grandchild_announced < grandchild_history < response
    # The grandchild is announced on the child's stream, never on the root's.
    assert messages[grandchild_announced]["params"]["sessionId"] == child
    # No current state or capability before the response; current snapshots after it.
    for m in messages[:response]:
        update = (
            m.get("params", {}).get("update", {}) if m.get("method") == "session/update" else {}
        )
        if update.get("sessionUpdate") == "subagent_update":
            assert "state" not in update and "capabilities" not in update, update
    after = [
        m["params"]["update"]
        for m in messages[response:]
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "subagent_update"
    ]
    assert {u["sessionId"] for u in after if u.get("state") == {"state": "idle"}} == {
        child,
        grandchild,
    }
    # The child's history holds what its parent sent it (incoming view) and its answer.
    child_updates = [u["update"] for u in client.updates if u["sessionId"] == child]
    incoming = [u for u in child_updates if u["sessionUpdate"] == "session_message"]
    assert (
        incoming
        and incoming[0]["senderSessionId"] == root
        and incoming[0]["recipientSessionId"] == child
    )
    assert any(
        u["sessionUpdate"] == "agent_message_chunk" and "mid done" in u["content"]["text"]
        for u in child_updates
    )
    assert_valid_acp(client, unstable=True)


# Every collab tool the root can call on one child, the child answering each assignment.
TOOLS_PROMPT = scenario.script(
    scenario.spawn("@@ say one"),
    scenario.wait(),
    scenario.send_input("@@ say two"),
    scenario.wait(),
    scenario.call("multi_agent_v1/close_agent", {"target": "{{agent_id}}"}),
    scenario.call("multi_agent_v1/resume_agent", {"id": "{{agent_id}}"}),
    "@@ say parent done",
)


def _final_calls(client: AcpClient, session_id: str) -> dict[str, dict[str, object]]:
    """The session's tool calls as the client ends up seeing them (later updates applied)."""
    return calls_seen(client.updates, session_id, ("title", "kind", "status", "content"))


@pytest.mark.parametrize("subagents", [True, False], ids=["subagents", "without-capability"])
async def test_a_loaded_roots_collab_calls_have_their_live_titles_and_kinds(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    subagents: bool,
) -> None:
    """What Codex stored replays as the same tool calls the client saw live (with the
    capability: wait, close, resume; without it spawn and send_input too)."""
    capabilities = scenario.SUBAGENTS if subagents else scenario.NO_SUBAGENTS
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as first:
            await first.initialize(capabilities)
            root = await first.new_session(str(workspace))
            assert await first.prompt(root, TOOLS_PROMPT) == Ended({"stopReason": "end_turn"})
            # A live spawn is retitled once its child is placed (its thread/read answered),
            # which may come just after the prompt's answer: wait for it, bounded above.
            await first.wait_for(
                lambda _m: (
                    not [
                        c
                        for c in _final_calls(first, root).values()
                        if "sub-agent" in str(c["title"])
                    ]
                )
            )
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize(capabilities)
            await client.request(
                "session/load", {"sessionId": root, "cwd": str(workspace), "mcpServers": []}
            )
    live, replayed = _final_calls(first, root), _final_calls(client, root)
    tools = ["wait", "wait", "closeAgent", "resumeAgent"]
    if not subagents:
        tools = ["spawnAgent", "wait", "sendInput", "wait", "closeAgent", "resumeAgent"]
    assert len(live) == len(tools), live
    assert not [c["title"] for c in live.values() if "sub-agent" in str(c["title"])], live
    assert replayed == live
    assert_valid_acp(client, unstable=subagents)
