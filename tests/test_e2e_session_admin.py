"""A session's status, title and archiving in ACP v1 (its unstable schema), against the real
Codex: ``session/status``, ``session/set_title``, ``session/archive`` and ``session/unarchive``,
and ``session/list``'s archive filter, plain and through the daemon. A session Codex does not
know is not found, naming it. Every message the bridge sent validates against the unstable
schema (``open_conversation``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.jsonrpc import RpcError
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation

pytestmark = pytest.mark.e2e

NOT_FOUND = -32002
UNSTABLE: dict[str, Any] = {"capabilities": {"subagents": {}}, "unstable": True}


async def _rows(talk: Conversation, archived: str | None = None) -> dict[str, dict[str, Any]]:
    params = {} if archived is None else {"archived": archived}
    listed = await talk.client.request("session/list", params)
    return {row["sessionId"]: row for row in listed["sessions"]}


@pytest.mark.transports("stdio", "daemon")
async def test_v1_status_title_archive_and_unarchive_round_trip(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(**UNSTABLE) as talk:
            caps = talk.init["agentCapabilities"]["sessionCapabilities"]
            assert {k: caps.get(k) for k in ("status", "title", "archive")} == {
                "status": {},
                "title": {},
                "archive": {},
            }
            await talk.said("@@ say keep this")
            client, sid = talk.client, talk.sid
            assert await client.request("session/status", {"sessionId": sid}) == {"status": "open"}
            titled = await client.request(
                "session/set_title", {"sessionId": sid, "title": "Tuesday's plans"}
            )
            assert titled == {"title": "Tuesday's plans"}
            await client.wait_for(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("title") == "Tuesday's plans"
                )
            )
            row = (await _rows(talk))[sid]
            assert row["title"] == "Tuesday's plans" and row["archived"] is False
            assert await client.request("session/archive", {"sessionId": sid}) == {}
            # Archiving closes it here, as Codex unloads it: stored, no longer open.
            assert await client.request("session/status", {"sessionId": sid}) == {"status": "saved"}
            with pytest.raises(RpcError) as prompted:
                await talk.prompt("@@ say archived?")
            assert prompted.value.code == NOT_FOUND
            assert sid not in await _rows(talk)
            archived = await _rows(talk, "only")
            assert archived[sid]["archived"] is True
            assert archived[sid]["title"] == "Tuesday's plans"
            assert await client.request("session/unarchive", {"sessionId": sid}) == {}
            assert (await _rows(talk))[sid]["archived"] is False
            assert sid not in await _rows(talk, "only")
            # Unarchived, it can be loaded and prompted again.
            await client.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            assert await talk.said("@@ say back again") == "back again"
            with pytest.raises(RpcError) as include:
                await _rows(talk, "include")
            assert include.value.code == -32602


async def test_v1_a_session_codex_does_not_know_is_not_found_and_a_stored_one_is_saved(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    unknown = str(uuid.uuid4())
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(**UNSTABLE) as talk:
            await talk.said("@@ say stored")
            sid = talk.sid
            for method, params in (
                ("session/status", {}),
                ("session/set_title", {"title": "x"}),
                ("session/archive", {}),
                ("session/unarchive", {}),
            ):
                with pytest.raises(RpcError) as refused:
                    await talk.client.request(method, {"sessionId": unknown, **params})
                assert refused.value.code == NOT_FOUND, (method, refused.value)
                assert unknown in refused.value.message
                assert refused.value.data["sessionId"] == unknown
        # A client that did not open it: stored, so saved; it may retitle it all the same.
        async with open_conversation(session=False, **UNSTABLE) as later:
            assert await later.client.request("session/status", {"sessionId": sid}) == {
                "status": "saved"
            }
            assert await later.client.request(
                "session/set_title", {"sessionId": sid, "title": "Renamed later"}
            ) == {"title": "Renamed later"}
            assert (await _rows(later))[sid]["title"] == "Renamed later"
            await later.client.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            assert await later.client.request("session/status", {"sessionId": sid}) == {
                "status": "open"
            }


@pytest.mark.transports("daemon")
async def test_v1_another_windows_session_is_open_on_the_daemons_codex(
    open_conversation: OpenConversation,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            open_conversation(**UNSTABLE) as first,
            open_conversation(session=False, **UNSTABLE) as second,
        ):
            await first.said("@@ say shared")
            status = await second.client.request("session/status", {"sessionId": first.sid})
            assert status == {"status": "open"}
