"""Codex dies under the bridge and is brought back (``serve``'s supervision).

The scenario kills the Codex of the bridge it drives: every ``app-server``
process below this one (a recording runs one bridge at a time), the process
that does the work first, then its Node launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from ..app_server import app_server
from ..reading import Ended
from . import APP_SERVER_ENV, Scenario, open_session, subagents


def codex_processes(root: int) -> list[int]:
    """Every ``app-server`` process below ``root``, deepest first."""
    found: list[tuple[int, int]] = []
    frontier = [(root, 0)]
    while frontier:
        pid, depth = frontier.pop()
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue  # gone meanwhile (a Codex that keeps dying)
        for task in tasks:
            with contextlib.suppress(OSError):
                for child in map(int, (task / "children").read_text().split()):
                    frontier.append((child, depth + 1))
                    with contextlib.suppress(OSError):
                        if b"app-server" in Path(f"/proc/{child}/cmdline").read_bytes().split(
                            b"\0"
                        ):
                            found.append((depth + 1, child))
    return [pid for _depth, pid in sorted(found, reverse=True)]


def kill_codex(root: int | None = None) -> list[int]:
    """SIGKILL the Codex below ``root`` (default: this process); its pids."""
    pids = codex_processes(os.getpid() if root is None else root)
    assert pids, "no Codex to kill"
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


async def codex_killed_mid_answer(client: AcpClient, workspace: str) -> None:
    """Codex is killed while it streams an answer: the prompt fails with how Codex ended,
    the bridge restarts Codex and resumes the session, and the same session answers the
    next prompt (sent at once: it waits for the new Codex)."""
    session = await open_session(client, workspace)
    failed: dict[str, RpcError] = {}

    async def prompt() -> None:
        try:
            await client.prompt(session, "@@ words 3000 delay_ms=10")
        except RpcError as exc:
            failed["error"] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 20)
        kill_codex()
    assert "error" in failed
    assert await client.prompt(session, "@@ say back again") == Ended({"stopReason": "end_turn"})


async def codex_killed_during_child(client: AcpClient, workspace: str) -> None:
    """Codex is killed while a sub-agent streams: the child goes ``unknown``; once Codex is
    back the child is resumed and read, and a fresh state replaces ``unknown``."""
    root = await open_session(client, workspace, subagents.SUBAGENTS)
    failed: dict[str, RpcError] = {}

    async def prompt() -> None:
        try:
            await client.prompt(root, subagents.CANCEL_PARENT)
        except RpcError as exc:
            failed["error"] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        child = await subagents.words_from_first_child(client, 20)
        kill_codex()
    await client.wait_for(lambda _m: subagents.states(client, child)[-1]["state"] != "unknown")
    assert "error" in failed
    assert await client.prompt(root, "@@ say back again") == Ended({"stopReason": "end_turn"})


async def websocket_dropped(client: AcpClient, workspace: str) -> None:
    """``serve --codex-url``: the app-server dies and a new one comes up on the same port (a
    service manager restarting it); the bridge reconnects, resumes the session, and the same
    session answers again, its history kept in Codex's store."""
    server = json.loads(os.environ[APP_SERVER_ENV])
    session = await open_session(client, workspace)
    assert await client.prompt(session, "@@ say before") == Ended({"stopReason": "end_turn"})
    kill_codex()
    # The bridge notices, tries again and again (0.25 s, 0.5 s, ...) until the new one is up.
    await trio.sleep(0.3)
    async with app_server(
        server["codexBin"], Path(server["codexHome"]), Path(server["dir"]), port=server["port"]
    ):
        assert await client.prompt(session, "@@ say after") == Ended({"stopReason": "end_turn"})


SCENARIOS = [
    Scenario(
        "codex_killed_mid_answer",
        "Codex killed while streaming: the prompt fails, Codex is restarted, the session "
        "resumed, and the same session answers the next prompt",
        codex_killed_mid_answer,
    ),
    Scenario(
        "websocket_dropped",
        "attached with --codex-url: the app-server dies and comes back on the same port; the "
        "bridge reconnects and the session answers again",
        websocket_dropped,
        attach=True,
    ),
    Scenario(
        "codex_killed_during_child",
        "Codex killed while a child streams: unknown, then a fresh state once Codex is back",
        codex_killed_during_child,
    ),
]
