"""A sub-agent given new work after its root was resumed (or loaded) on a long-lived Codex,
against the real Codex.

The first ``serve`` spawns a child and goes away; Codex lives on, the child's thread still
loaded in it. A second ``serve`` opens the root again (``session/resume`` or
``session/load``) and the root sends the same child new work (``send_input``). Codex sends a
thread's events only to the connections subscribed to it, and the new connection opened only
the root: the child's incoming message and its answer reach the client only because the
bridge subscribes it to the root's loaded sub-agents. Run over every route to a long-lived
Codex: ``--codex-url``, the bridge's daemon, and Codex's own daemon.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from tests.support.app_server import app_server
from tests.support.codex_daemon import codex_daemon
from tests.support.e2e import SCENARIO_SECONDS, Transport, assert_valid_acp, running_bridge
from tests.support.reading import Ended, text_of
from tests.support.scenarios import subagents as scenario

pytestmark = pytest.mark.e2e

FIRST = scenario.script(scenario.spawn("@@ say one"), scenario.wait(), "@@ say parent done")


def _again(child: str) -> str:
    return scenario.script(
        scenario.send_input("@@ say second answer", child),
        scenario.wait(child),
        "@@ say parent done again",
    )


LongLivedCodex = Callable[[str], AbstractAsyncContextManager[Transport]]


@pytest.fixture
def long_lived_codex(
    transport_of: LongLivedCodex,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    codex_home: Path,
    codex_bin: str,
) -> LongLivedCodex:
    """``long_lived_codex(route)``: a Codex that outlives each ``serve``, and how ``serve``
    reaches it."""

    @asynccontextmanager
    async def start(route: str) -> AsyncIterator[Transport]:
        if route == "codex-daemon":
            async with codex_daemon(codex_home, codex_bin, bridge_env) as daemon:
                argv = [*bridge_argv[:4], "--codex-url", daemon.url, *bridge_argv[4:]]
                yield Transport(route, argv, bridge_env)
        else:
            async with transport_of(route) as transport:
                yield transport

    return start


async def _spawn_a_child(first: AcpClient, workspace: Path) -> tuple[str, str]:
    """The first ``serve``'s part: a root that spawned a child, which said "one"."""
    await first.initialize(scenario.SUBAGENTS)
    root = await first.new_session(str(workspace))
    assert await first.prompt(root, FIRST) == Ended({"stopReason": "end_turn"})
    [child] = {
        u["update"]["sessionId"]
        for u in first.updates
        if u["update"]["sessionUpdate"] == "subagent_update" and "title" in u["update"]
    }
    await first.wait_for(lambda _m: "one" in first.text_of(child))
    return root, child


def _update(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("method") != "session/update":
        return {}
    update: dict[str, Any] = message["params"]["update"]
    return update


@pytest.mark.parametrize("opening", ["session/resume", "session/load"])
@pytest.mark.parametrize("route", ["websocket", "daemon", "codex-daemon"])
async def test_a_known_sub_agent_given_new_work_after_a_reconnection_reaches_the_client(
    route: str,
    opening: str,
    long_lived_codex: LongLivedCodex,
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with long_lived_codex(route) as transport:
            async with running_bridge(transport.argv, transport.env, stderr_file) as first:
                root, child = await _spawn_a_child(first, workspace)

            async with running_bridge(transport.argv, transport.env, stderr_file) as client:
                await client.initialize(scenario.SUBAGENTS)
                await client.request(
                    opening, {"sessionId": root, "cwd": str(workspace), "mcpServers": []}
                )
                opened = len(client.received)
                assert await client.prompt(root, _again(child)) == Ended({"stopReason": "end_turn"})
                # The child's answer ends its turn before the parent's wait returns; its
                # events may still be on their way: waited for, bounded by the scenario.
                await client.wait_for(lambda _m: "second answer" in client.text_of(child))
    _check(client, root, child, opened, replays=opening == "session/load")
    assert_valid_acp(client, unstable=True)


def _check(client: AcpClient, root: str, child: str, opened: int, *, replays: bool) -> None:
    """The RFD's order after the open: the child announced (once) before its traffic, the
    root's message to it incoming in its session, its answer in its session."""
    messages = client.received
    announced = [
        i
        for i, m in enumerate(messages)
        if _update(m).get("sessionUpdate") == "subagent_update"
        and _update(m).get("sessionId") == child
        and "title" in _update(m)
    ]
    assert len(announced) == 1, announced
    assert messages[announced[0]]["params"]["sessionId"] == root
    in_child = [
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update" and m["params"]["sessionId"] == child
    ]
    assert in_child and announced[0] < in_child[0]
    live = [messages[i]["params"]["update"] for i in in_child if i >= opened]
    incoming = [
        u
        for u in live
        if u["sessionUpdate"] == "session_message"
        and u["senderSessionId"] == root
        and u["recipientSessionId"] == child
    ]
    assert len(incoming) == 1 and text_of(incoming, "session_message") == "@@ say second answer"
    assert text_of(live) == "second answer"
    # Its history (a load's replay) is sent once, before the open's answer.
    replayed = [
        u
        for i in in_child
        if i < opened
        for u in [messages[i]["params"]["update"]]
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert text_of(replayed) == ("one" if replays else "")


async def test_a_sub_agent_codex_no_longer_holds_reaches_the_client_once_given_new_work(
    codex_bin: str,
    codex_home: Path,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    workspace: Path,
    stderr_file: Path,
    tmp_path: Path,
) -> None:
    """Codex restarted between the two ``serve``: it holds neither the root nor the child, and
    nothing is left to subscribe to. Codex 0.171 does not load a sub-agent for ``send_input``
    (its ``wait`` then finds it ``notFound``): the root resumes it (``resume_agent``), which
    loads it for the connections subscribed to the root, then gives it its work."""

    @asynccontextmanager
    async def serve_on_a_new_codex(name: str) -> AsyncIterator[AcpClient]:
        (tmp_path / name).mkdir()
        async with app_server(codex_bin, codex_home, tmp_path / name) as (url, token, _codex):
            argv = [*bridge_argv[:4], "--codex-url", url, "--codex-token-file", str(token)]
            async with running_bridge([*argv, *bridge_argv[4:]], bridge_env, stderr_file) as c:
                yield c

    with trio.fail_after(SCENARIO_SECONDS):
        async with serve_on_a_new_codex("first") as first:
            root, child = await _spawn_a_child(first, workspace)
        async with serve_on_a_new_codex("second") as client:
            await client.initialize(scenario.SUBAGENTS)
            await client.request(
                "session/resume", {"sessionId": root, "cwd": str(workspace), "mcpServers": []}
            )
            opened = len(client.received)
            again = scenario.script(
                scenario.call("multi_agent_v1/resume_agent", {"id": child}), _again(child)
            )
            assert await client.prompt(root, again) == Ended({"stopReason": "end_turn"})
            await client.wait_for(lambda _m: "second answer" in client.text_of(child))
    _check(client, root, child, opened, replays=False)
    assert_valid_acp(client, unstable=True)
