"""JetBrains AIR's extensions (``_meta.jetbrains.air``) against the real Codex.

The shapes follow the AIR document of the TypeScript Codex adapter (its
``docs/air-extensions.md``): the declaration in ``initialize``, the session index's
rows and ``_session/list_changed``. A client that declares nothing gets none of it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import trio

from bridge.acp_client import AcpClient

from .support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

AIR_INDEX = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "_meta": {"jetbrains": {"air": {"version": 1, "capabilities": ["sessionIndex"]}}},
}


def air_of(row: dict[str, Any]) -> dict[str, Any]:
    """A row's ``_meta.jetbrains.air``, checked against the AIR document's row fields."""
    fields = row["_meta"]["jetbrains"]["air"]
    assert fields["version"] == 1
    assert isinstance(fields["archived"], bool)
    assert set(fields) <= {
        "version",
        "archived",
        "lastPromptAt",
        "lastTurnEndedAt",
        "state",
        "model",
        "forkedFrom",
    }, fields
    for stamp in ("lastPromptAt", "lastTurnEndedAt"):
        if stamp in fields:
            assert ISO.fullmatch(fields[stamp]), fields
    assert fields.get("state", "idle") in ("running", "requires_action", "idle"), fields
    return dict(fields)


async def row(client: AcpClient, cwd: Path, session_id: str) -> dict[str, Any]:
    listed = await client.request("session/list", {"cwd": str(cwd)})
    (found,) = [s for s in listed["sessions"] if s["sessionId"] == session_id]
    return air_of(found)


async def list_changed(client: AcpClient, start: int, cwd: Path) -> int:
    """Wait for ``_session/list_changed {cwd}`` among messages from ``start``; its index."""
    message = await client.wait_for_index(
        start,
        lambda m: m.get("method") == "_session/list_changed" and m["params"] == {"cwd": str(cwd)},
    )
    return client.received.index(message)


async def test_session_index_rows_carry_state_and_times_and_changes_are_pushed(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            init = await client.initialize(AIR_INDEX)
            assert init["_meta"]["jetbrains"]["air"] == {
                "version": 1,
                "capabilities": ["sessionIndex"],
            }
            sid = await client.new_session(str(workspace))
            assert await client.prompt(sid, "@@ say first") == {"stopReason": "end_turn"}

            first = await row(client, workspace, sid)
            assert first["archived"] is False
            assert first["state"] == "idle"
            assert "lastPromptAt" in first and "lastTurnEndedAt" in first

            # A turn that runs a while: the listed cwd is told its row changed, and the
            # row says running; once the turn ends, again, and idle.
            start = len(client.received)
            async with trio.open_nursery() as nursery:
                answers: list[Any] = []

                async def prompt() -> None:
                    answers.append(await client.prompt(sid, "@@ sleep 3000\n@@ say done"))

                nursery.start_soon(prompt)
                seen = await list_changed(client, start, workspace)
                running = await row(client, workspace, sid)
                assert running["state"] == "running", running
            assert answers == [{"stopReason": "end_turn"}]
            await list_changed(client, seen + 1, workspace)
            ended = await row(client, workspace, sid)
            assert ended["state"] == "idle"
            assert ended["lastTurnEndedAt"] >= first["lastTurnEndedAt"]
            assert ended["lastPromptAt"] >= first["lastPromptAt"]
        assert_valid_acp(client)


async def test_a_client_that_declares_nothing_gets_no_index_fields_and_no_pushes(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            init = await client.initialize()
            assert "jetbrains" not in init.get("_meta", {})
            sid = await client.new_session(str(workspace))
            await client.request("session/list", {"cwd": str(workspace)})
            assert await client.prompt(sid, "@@ say first") == {"stopReason": "end_turn"}
            listed = await client.request("session/list", {"cwd": str(workspace)})
            assert [s["sessionId"] for s in listed["sessions"]] == [sid]
            assert "_meta" not in listed["sessions"][0]
            # An AIR client that did not declare sessionIndex: not offered, nothing added.
            init = await client.initialize(
                {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": []}}}}
            )
            assert init["_meta"]["jetbrains"]["air"] == {"version": 1, "capabilities": []}
            listed = await client.request("session/list", {"cwd": str(workspace)})
            assert "_meta" not in listed["sessions"][0]
            assert await client.prompt(sid, "@@ say again") == {"stopReason": "end_turn"}
        assert not [m for m in client.received if m.get("method") == "_session/list_changed"]
        assert_valid_acp(client)
