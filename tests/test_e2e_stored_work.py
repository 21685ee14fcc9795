"""The stored work read in pages, against the real Codex: a history longer than a page loads
whole and in order, and a thread file Codex did not index is listed once the bridge has had
Codex repair its index."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from bridge.engine.features.subagent_history import TURN_PAGE
from tests.support.e2e import SCENARIO_SECONDS, assert_valid_acp, running_bridge
from tests.support.scenarios import open_session

pytestmark = pytest.mark.e2e


def texts(updates: list[dict[str, object]], kind: str) -> list[object]:
    return [
        u["update"]["content"]["text"]  # type: ignore[index]
        for u in updates
        if u["update"]["sessionUpdate"] == kind  # type: ignore[index]
    ]


@pytest.mark.codex_versions
async def test_a_history_longer_than_a_page_loads_whole_and_in_order(
    bridge_argv: list[str], bridge_env: dict[str, str], workspace: Path, stderr_file: Path
) -> None:
    turns = TURN_PAGE + 2  # two pages of thread/turns/list
    with trio.fail_after(SCENARIO_SECONDS + turns):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as first:
            session = await open_session(first, str(workspace))
            for n in range(turns):
                assert await first.prompt(session, f"@@ say answer {n}") == {
                    "stopReason": "end_turn"
                }
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize()
            await client.request(
                "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
            )
    replayed = [u for u in client.updates if u["sessionId"] == session]
    assert texts(replayed, "user_message_chunk") == [f"@@ say answer {n}" for n in range(turns)]
    assert texts(replayed, "agent_message_chunk") == [f"answer {n}" for n in range(turns)]
    assert_valid_acp(client)


async def test_a_thread_file_codex_did_not_index_is_listed_after_the_first_listing(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    codex_home: Path,
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_bridge(bridge_argv, bridge_env, stderr_file) as first:
            indexed = await open_session(first, str(workspace))
            assert await first.prompt(indexed, "@@ say stored") == {"stopReason": "end_turn"}
        # A copy under a new id, as a store copied from elsewhere holds: a file Codex's
        # index has no row for.
        [rollout] = list((codex_home / "sessions").rglob(f"*{indexed}.jsonl"))
        copied = str(uuid.uuid4())
        text = rollout.read_text().replace(indexed, copied)
        rollout.with_name(rollout.name.replace(indexed, copied)).write_text(text)

        async with running_bridge(bridge_argv, bridge_env, stderr_file) as client:
            await client.initialize()
            listing = await client.request("session/list", {})
            ids = [s["sessionId"] for s in listing["sessions"]]
            # Codex's index alone: the copy is not there yet.
            assert ids == [indexed]
            # The repair the first listing set off indexes it: a later listing has it.
            while copied not in ids:
                await trio.sleep(0.1)
                listing = await client.request("session/list", {})
                ids = [s["sessionId"] for s in listing["sessions"]]
            assert sorted(ids) == sorted([indexed, copied])
            await client.request(
                "session/load", {"sessionId": copied, "cwd": str(workspace), "mcpServers": []}
            )
    replayed = [u for u in client.updates if u["sessionId"] == copied]
    assert texts(replayed, "agent_message_chunk") == ["stored"]
    assert_valid_acp(client)
