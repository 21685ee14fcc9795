"""The stored work read in pages, against the real Codex: a history longer than a page loads
whole and in order, and a thread file Codex did not index is listed once the bridge has had
Codex repair its index."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.engine.features.subagents._history_pages import ITEM_PAGE, TURN_PAGE
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation, earlier_session
from tests.support.reading import text_of

pytestmark = pytest.mark.e2e


def texts(updates: list[dict[str, Any]], kind: str) -> list[str]:
    """The text of each ``kind`` chunk among ``updates`` (``session/update`` params)."""
    return [text_of([u["update"]], kind) for u in updates if u["update"]["sessionUpdate"] == kind]


async def loaded(open_conversation: OpenConversation, session: str, cwd: Path) -> list[Any]:
    """The updates of ``session`` that a new bridge's ``session/load`` replays, once that
    bridge has gone (its messages validated)."""
    async with open_conversation(session=False) as talk:
        load = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
        await talk.client.request("session/load", load)
    return [u for u in talk.client.updates if u["sessionId"] == session]


@pytest.mark.codex_versions
async def test_a_history_longer_than_a_page_loads_whole_and_in_order(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    # Two pages of thread/items/list (two items a turn), and of thread/turns/list.
    turns = max(TURN_PAGE, ITEM_PAGE // 2) + 2
    with trio.fail_after(SCENARIO_SECONDS + turns):
        async with open_conversation() as first:
            for n in range(turns):
                await first.said(f"@@ say answer {n}")
        replayed = await loaded(open_conversation, first.sid, workspace)
    assert texts(replayed, "user_message_chunk") == [f"@@ say answer {n}" for n in range(turns)]
    assert texts(replayed, "agent_message_chunk") == [f"answer {n}" for n in range(turns)]


async def test_a_thread_file_codex_did_not_index_is_listed_after_the_first_listing(
    open_conversation: OpenConversation, codex_home: Path, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        indexed = (await earlier_session(open_conversation, "@@ say stored")).sid
        # A copy under a new id, as a store copied from elsewhere holds: a file Codex's
        # index has no row for.
        [rollout] = list((codex_home / "sessions").rglob(f"*{indexed}.jsonl"))
        copied = str(uuid.uuid4())
        text = rollout.read_text().replace(indexed, copied)
        rollout.with_name(rollout.name.replace(indexed, copied)).write_text(text)

        async with open_conversation(session=False) as talk:
            listing = await talk.client.request("session/list", {})
            ids = [s["sessionId"] for s in listing["sessions"]]
            # Codex's index alone: the copy is not there yet.
            assert ids == [indexed]
            # The repair the first listing set off indexes it: a later listing has it.
            while copied not in ids:
                await trio.sleep(0.1)
                listing = await talk.client.request("session/list", {})
                ids = [s["sessionId"] for s in listing["sessions"]]
            assert sorted(ids) == sorted([indexed, copied])
            load = {"sessionId": copied, "cwd": str(workspace), "mcpServers": []}
            await talk.client.request("session/load", load)
    replayed = [u for u in talk.client.updates if u["sessionId"] == copied]
    assert texts(replayed, "agent_message_chunk") == ["stored"]
