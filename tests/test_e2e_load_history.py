"""``session/load`` replays what the live session showed, against the real Codex.

A hidden sub-agent's command that asked for permission was shown on its root (a client
without ``subagents``): the load of that root shows it there too. A command that finished
after its turn (it yielded, or the turn was cancelled while it ran) is stored by Codex in
its turn once it ends, with its final state: the load shows that state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.daemon import StartDaemon
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.reading import Ended, calls_seen
from tests.support.scenarios.approvals import Answers
from tests.support.scenarios.subagents import (
    NESTED_TOML,
    NO_SUBAGENTS,
    call,
    deferred,
    script,
    spawn,
    wait,
)
from tests.test_e2e_cancel_commands import command_runs, until
from tests.test_e2e_daemon import serve_argv

pytestmark = pytest.mark.e2e


def final_calls(client: AcpClient, session_id: str) -> dict[str, dict[str, Any]]:
    """The session's tool calls as the client ends up seeing them: title and status."""
    return calls_seen(client.updates, session_id)


async def load(client: AcpClient, session_id: str, workspace: Path) -> None:
    await client.request(
        "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    )


async def loaded(
    open_conversation: OpenConversation, root: str, workspace: Path, **options: Any
) -> AcpClient:
    """The client of a new bridge that has loaded ``root``, once that bridge has gone."""
    async with open_conversation(session=False, **options) as talk:
        await load(talk.client, root, workspace)
    return talk.client


YIELDED = script(
    call("exec_command", {"cmd": "sleep 2; echo late-done", "yield_time_ms": 300}),
    "@@ say yielded",
)


async def test_a_command_that_outlived_its_turn_is_replayed_finished(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            first, root = talk.client, talk.sid
            assert await talk.prompt(YIELDED) == Ended({"stopReason": "end_turn"})
            await first.wait_for(
                lambda _m: any(
                    c.get("status") == "completed" for c in final_calls(first, root).values()
                )
            )
        client = await loaded(open_conversation, root, workspace)
    live, replayed = final_calls(first, root), final_calls(client, root)
    assert live and replayed == live


async def test_a_cancelled_command_is_replayed_as_it_ended(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    running = script(
        call("exec_command", {"cmd": "sleep 7.5; echo x", "yield_time_ms": 10000}), "@@ say never"
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            first, root = talk.client, talk.sid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.prompt, root, running)
                await first.wait_for(lambda _m: bool(final_calls(first, root)))
                await until(lambda: command_runs(7.5), "the command runs")
                await first.notify("session/cancel", {"sessionId": root})
            await trio.sleep(3)
        client = await loaded(open_conversation, root, workspace)
    live, replayed = final_calls(first, root), final_calls(client, root)
    assert live and replayed == live


async def test_a_load_through_the_daemon_shows_a_command_still_running_then_its_end(
    start_daemon: StartDaemon, runtime: Path, open_conversation: OpenConversation, workspace: Path
) -> None:
    """The daemon's Codex still runs a command of a finished turn when a second editor loads
    the session: Codex has not stored it yet (it stores a command once it ends), so the
    replay shows it running, as the first editor saw it, and Codex's end of it finishes it."""
    slow = script(
        call("exec_command", {"cmd": "sleep 4; echo late-done", "yield_time_ms": 300}),
        "@@ say yielded",
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon():
            argv = serve_argv(runtime)
            async with open_conversation(argv=argv) as talk:
                first, root = talk.client, talk.sid
                assert await talk.prompt(slow) == Ended({"stopReason": "end_turn"})
            live = final_calls(first, root)
            [call_id] = live
            assert live[call_id] == {"title": "sleep 4; echo late-done", "status": "in_progress"}
            async with open_conversation(argv=argv, session=False) as again:
                client = again.client
                await load(client, root, workspace)
                assert final_calls(client, root) == live
                await client.wait_for(
                    lambda _m: final_calls(client, root)[call_id].get("status") == "completed"
                )


#: A hidden child runs a command that needs no approval, then one that asks (a file is where
#: it wants a folder, so it fails although allowed), then spawns a grandchild whose command
#: asks too.
GRANDCHILD_ASKS = script(
    call(
        "exec_command",
        {
            "cmd": "touch grandchild.txt",
            "sandbox_permissions": "require_escalated",
            "justification": "the grandchild needs it",
        },
    ),
    "@@ say grandchild done",
)
CHILD_ASKS = script(
    call("exec_command", {"cmd": "echo quiet"}),
    call(
        "exec_command",
        {
            "cmd": "touch blocked/child.txt",
            "sandbox_permissions": "require_escalated",
            "justification": "the child needs it",
        },
    ),
    spawn(GRANDCHILD_ASKS),
    wait(timeout_ms=20_000),
    "@@ say child done",
)
ROOT_SPAWNS = script(deferred(spawn(CHILD_ASKS)), wait(timeout_ms=30_000), "@@ say parent done")


async def test_a_hidden_sub_agents_commands_shown_on_the_root_are_replayed_there(
    open_conversation: OpenConversation,
    codex_home: Path,
    scripted_model: ScriptedModel,
    workspace: Path,
) -> None:
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=NESTED_TOML)
    (workspace / "blocked").write_text("a file, not a folder")
    with trio.fail_after(SCENARIO_SECONDS):
        answers = Answers(permission="allow_once")
        options: dict[str, Any] = {"capabilities": NO_SUBAGENTS}
        async with open_conversation(on_request=answers, **options) as talk:
            first, root = talk.client, talk.sid
            assert await talk.prompt(ROOT_SPAWNS) == Ended({"stopReason": "end_turn"})
        client = await loaded(open_conversation, root, workspace, **options)
    live, replayed = final_calls(first, root), final_calls(client, root)
    asked = {
        params["toolCall"]["toolCallId"]: params["toolCall"]["title"]
        for method, params in answers.requests
        if method == "session/request_permission"
    }
    assert len(asked) == 2, asked
    for tool_call_id, title in asked.items():
        assert replayed[tool_call_id]["title"] == live[tool_call_id]["title"] == title
    # Each asked command's final status is its own (the live root follows the command's item;
    # the replay shows the stored item).
    statuses = {replayed[i]["status"] for i in asked}
    assert statuses == {"completed", "failed"}, replayed
    # Every tool call the live root showed is replayed with its title.
    assert {i: c["title"] for i, c in replayed.items() if i in live} == {
        i: c["title"] for i, c in live.items()
    }
