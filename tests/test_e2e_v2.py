"""ACP v2 end to end: the project's client speaking v2 to the real bridge, the real Codex
0.169 and the scripted model. Every message the bridge sends is checked against the v2
schema and the RFD's transcript rules (``assert_valid_acp(version=2)``)."""

from __future__ import annotations

import base64
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation, earlier_session, words
from tests.support.reading import Ended, text_of
from tests.support.scenarios.approvals import approving
from tests.support.scenarios.subagents import CANCEL_CHILD, SPAWN_THREE, children
from tests.support.scenarios.v2 import cancel_offered_call
from tests.test_e2e_cancel_commands import GONE_WITHIN, command_runs, until

pytestmark = [pytest.mark.e2e, pytest.mark.acp_versions(2)]

ESCALATED = (
    '@@ call exec_command {"cmd":"touch approved.txt","sandbox_permissions":"require_escalated",'
    '"justification":"needs it"}\n@@ then\n@@ say done'
)


@asynccontextmanager
async def prompt_running(
    client: AcpClient, session: str, text: str
) -> AsyncIterator[list[dict[str, Any]]]:
    """A v2 prompt running while the body acts on it; on leaving, its work has ended and
    the list holds the ``idle`` update that ended it."""
    ended: list[dict[str, Any]] = []

    async def run() -> None:
        ended.append((await client.prompt_v2(session, text))[1])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield ended


def states(client: AcpClient, session: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in p["update"].items() if k != "sessionUpdate"}
        for p in client.updates
        if p["sessionId"] == session and p["update"]["sessionUpdate"] == "state_update"
    ]


def kinds(client: AcpClient, session: str) -> list[str]:
    return [p["update"]["sessionUpdate"] for p in client.updates if p["sessionId"] == session]


async def test_a_v2_prompt_streams_and_ends_with_an_idle_state(
    open_conversation: OpenConversation,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            assert talk.init["protocolVersion"] == 2
            message_id, ended = await client.prompt_v2(session, "@@ words 300")
            assert ended == Ended(
                {
                    "sessionUpdate": "state_update",
                    "state": "idle",
                    "stopReason": "end_turn",
                }
            )
            assert client.text_of(session) == words(300)
            [echo] = [
                p["update"]
                for p in client.updates
                if p["update"]["sessionUpdate"] == "user_message"
            ]
            assert echo["messageId"] == message_id
            assert echo["content"] == [{"type": "text", "text": "@@ words 300"}]
            second, _ = await client.prompt_v2(session, "@@ say bye")
            assert second != message_id
            assert (
                states(client, session)
                == [
                    {"state": "running"},
                    Ended({"state": "idle", "stopReason": "end_turn"}),
                ]
                * 2
            )
            assert "tool_call" not in kinds(client, session)


@pytest.mark.transports("stdio", "daemon")
async def test_a_v2_command_and_its_approval(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    asked: list[dict[str, Any]] = []
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=approving(asked)) as talk:
            client, session = talk.client, talk.sid
            _, ended = await client.prompt_v2(session, ESCALATED)
            assert ended["stopReason"] == "end_turn"
            assert (workspace / "approved.txt").exists()
            [request] = asked
            assert request["subject"]["type"] == "tool_call"
            assert "touch approved.txt" in request["title"]
            assert states(client, session) == [
                {"state": "running"},
                {"state": "requires_action"},
                {"state": "running"},
                Ended({"state": "idle", "stopReason": "end_turn"}),
            ]
            tool_updates = [
                p["update"]
                for p in client.updates
                if p["update"]["sessionUpdate"] == "tool_call_update"
            ]
            assert tool_updates and tool_updates[-1]["status"] == "completed"


async def test_a_v2_cancel_ends_the_work_cancelled(open_conversation: OpenConversation) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            async with prompt_running(client, session, "@@ words 3000 delay_ms=10") as ended:
                await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 20)
                await client.notify("session/cancel", {"sessionId": session})
            assert ended == [
                Ended({"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"})
            ]
            assert len(client.text_of(session).split()) < 3000
            # The session takes new work after a cancel.
            _, again = await client.prompt_v2(session, "@@ say again")
            assert again["stopReason"] == "end_turn"


async def test_v2_resume_replays_history_only_when_asked(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as first:
            session = first.sid
            message_id, _ = await first.client.prompt_v2(session, "@@ say remembered words")
        for replay in (True, False):
            async with open_conversation(session=False) as talk:
                client = talk.client
                params: dict[str, Any] = {"sessionId": session, "cwd": str(workspace)}
                if replay:
                    params["replayFrom"] = {"type": "start"}
                await client.request("session/resume", params)
                answered = next(
                    n
                    for n, m in enumerate(client.received)
                    if m.get("id") is not None and "result" in m and "configOptions" in m["result"]
                )
                before = [
                    m["params"]["update"]
                    for m in client.received[:answered]
                    if m.get("method") == "session/update"
                ]
                texts = text_of(before)
                assert texts == ("remembered words" if replay else "")
                if replay:
                    # The prompt's message is replayed under the id its answer gave it.
                    replayed = [
                        u["messageId"] for u in before if u["sessionUpdate"] == "user_message_chunk"
                    ]
                    assert replayed == [message_id]
                assert before[-1] == {"sessionUpdate": "state_update", "state": "idle"}
                _, ended = await client.prompt_v2(session, "@@ say back again")
                assert ended["stopReason"] == "end_turn"


@pytest.mark.transports("stdio", "daemon")
async def test_v2_sub_agents_are_announced_with_their_state_on_both_streams(
    open_conversation: OpenConversation,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:  # no capability: v2 clients understand sub-agents
            client, session = talk.client, talk.sid
            _, ended = await client.prompt_v2(session, SPAWN_THREE)
            assert ended["stopReason"] == "end_turn"
            # A child is announced once its thread is read, which may end after the parent's
            # prompt (announced before its own traffic, not before its parent's end).
            await client.wait_for(
                lambda _m: (
                    len(children(client)) == 3
                    and all(
                        states(client, kid)[-1:]
                        == [Ended({"state": "idle", "stopReason": "end_turn"})]
                        for kid in children(client)
                    )
                )
            )
            kids = children(client)
            assert len(kids) == 3
            # Every child is titled with Codex's nickname: in its announcement, or in a later
            # patch of it when Codex could not be read in time (never left untitled).
            titled = {
                p["update"]["sessionId"]
                for p in client.updates
                if p["sessionId"] == session
                and p["update"]["sessionUpdate"] == "subagent_update"
                and p["update"].get("title")
            }
            assert titled == set(kids)
            for child in kids:
                own = states(client, child)
                assert own[0] == {"state": "running"}
                assert own[-1] == Ended({"state": "idle", "stopReason": "end_turn"})
                mirrored = [
                    p["update"]["state"]
                    for p in client.updates
                    if p["sessionId"] == session
                    and p["update"]["sessionUpdate"] == "subagent_update"
                    and p["update"]["sessionId"] == child
                    and p["update"].get("state")
                ]
                assert mirrored == own
                assert "session_message" in kinds(client, session)
                assert client.text_of(child).endswith("reporting")


@pytest.mark.transports("stdio", "daemon")
async def test_v2_cancelling_a_child_stops_it_alone(open_conversation: OpenConversation) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            async with prompt_running(client, session, CANCEL_CHILD) as ended:
                await client.wait_for(
                    lambda _m: (
                        bool(children(client))
                        and len(client.text_of(children(client)[0]).split()) >= 10
                    )
                )
                child = children(client)[0]
                await client.notify("session/cancel", {"sessionId": child})
                # On a loaded machine the cancel may land after the parent's turn ends.
                await client.wait_for(lambda _m: states(client, child)[-1]["state"] == "idle")
            assert states(client, child)[-1] == Ended({"state": "idle", "stopReason": "cancelled"})
            assert ended[0]["stopReason"] == "end_turn"  # the parent's work was not cancelled
            assert len(client.text_of(child).split()) < 3000


async def test_v2_a_running_command_is_cancelled_alone(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    # A sleep of its own, found by its argv: stopped, it is gone long before it would end.
    seconds = 40 + random.randrange(1000) / 1000
    script = (
        f'@@ call exec_command {{"cmd": "sleep {seconds}; touch late.txt"}}\n'
        "@@ then\n@@ say carried on"
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            async with prompt_running(client, session, script) as ended:
                call = await cancel_offered_call(client, session)
            assert ended[0]["stopReason"] == "end_turn"  # the turn went on without it
            await until(lambda: not command_runs(seconds), "the command stopped", GONE_WITHIN)
            final = [
                p["update"]
                for p in client.updates
                if p["update"]["sessionUpdate"] == "tool_call_update"
                and p["update"]["toolCallId"] == call
                and p["update"].get("status") in ("completed", "failed", "cancelled")
            ]
            assert final[-1]["status"] == "cancelled"
            assert final[-1]["capabilities"] is None
            assert client.text_of(session).endswith("carried on")
            assert not (workspace / "late.txt").exists()


async def test_v2_resume_replays_sub_agents_before_the_answer_and_their_state_after(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        first = await earlier_session(open_conversation, SPAWN_THREE)
        session, kids = first.sid, set(children(first.client))
        async with open_conversation(session=False) as talk:
            client = talk.client
            await client.request(
                "session/resume",
                {"sessionId": session, "cwd": str(workspace), "replayFrom": {"type": "start"}},
            )
            answered = next(
                n
                for n, m in enumerate(client.received)
                if "result" in m and "configOptions" in (m["result"] or {})
            )
            before = client.received[:answered]
            announced = {
                m["params"]["update"]["sessionId"]
                for m in before
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            }
            assert announced == kids, "every child is announced within the replay"
            replayed = {
                m["params"]["sessionId"]
                for m in before
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            }
            assert kids <= replayed, "each child's own history is replayed"
            # No child's state before the answer: the replay is history, not current work.
            assert not [
                m
                for m in before
                if m.get("method") == "session/update"
                and m["params"]["sessionId"] in kids
                and m["params"]["update"]["sessionUpdate"] == "state_update"
            ]


def terminals(updates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each terminal as a v2 client ends up holding it: ``terminal_update`` fields patch it
    (``output`` replaces the bytes), ``terminal_output_chunk`` bytes append, in order."""
    held: dict[str, dict[str, Any]] = {}
    for update in updates:
        kind = update["sessionUpdate"]
        if kind not in ("terminal_update", "terminal_output_chunk"):
            continue
        terminal = held.setdefault(update["terminalId"], {"bytes": b""})
        if kind == "terminal_output_chunk":
            terminal["bytes"] += base64.b64decode(update["data"], validate=True)
            continue
        for field, value in update.items():
            if field == "output":
                terminal["bytes"] = base64.b64decode(value["data"], validate=True)
            elif field not in ("sessionUpdate", "terminalId"):
                terminal[field] = value
    return held


#: A command printing at two moments, then the answer.
PRINTS_TWICE = (
    '@@ call exec_command {"cmd": "echo first; sleep 1; echo second"}\n@@ then\n@@ say done'
)


@pytest.mark.transports("stdio", "daemon")
async def test_v2_a_commands_output_is_its_terminals_and_the_answer_ends_as_an_upsert(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, session = talk.client, talk.sid
            _, ended = await client.prompt_v2(session, PRINTS_TWICE)
            assert ended["stopReason"] == "end_turn"
            updates = [p["update"] for p in client.updates if p["sessionId"] == session]
            [call_id] = {u["toolCallId"] for u in updates if "toolCallId" in u}
            calls = [u for u in updates if u.get("toolCallId") == call_id]
            # The call names its terminal from the start; the output is never its text.
            assert calls[0]["content"] == [{"type": "terminal", "terminalId": call_id}]
            assert all(c["type"] == "terminal" for u in calls for c in u.get("content", [])), calls
            assert calls[-1]["status"] == "completed"
            [terminal] = terminals(updates).values()
            assert terminal["command"] == "echo first; sleep 1; echo second"
            assert terminal["cwd"] == str(workspace)
            assert terminal["bytes"].decode() == "first\nsecond\n"
            assert terminal["exitStatus"] == {"exitCode": 0}
            # Streamed chunk by chunk while the command ran, before its call's end.
            kinds_seen = [u["sessionUpdate"] for u in updates]
            assert "terminal_output_chunk" in kinds_seen
            last_call = max(n for n, u in enumerate(updates) if u.get("toolCallId") == call_id)
            assert kinds_seen.index("terminal_output_chunk") < last_call
            # The answer: its chunks, then its whole text as the upsert of the same message.
            [upsert] = [u for u in updates if u["sessionUpdate"] == "agent_message"]
            assert upsert["content"] == [{"type": "text", "text": "done"}]
            chunk_ids = {
                u["messageId"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
            }
            assert chunk_ids <= {upsert["messageId"]}
            assert client.text_of(session) == "done"
        async with open_conversation(session=False) as again:
            client = again.client
            await client.request(
                "session/resume",
                {"sessionId": session, "cwd": str(workspace), "replayFrom": {"type": "start"}},
            )
            replayed = [p["update"] for p in client.updates if p["sessionId"] == session]
            # Replayed as one snapshot of the output Codex kept, with the exit.
            [replayed_terminal] = [u for u in replayed if u["sessionUpdate"] == "terminal_update"]
            assert replayed_terminal["terminalId"] == call_id
            assert base64.b64decode(replayed_terminal["output"]["data"]) == b"first\nsecond\n"
            assert replayed_terminal["exitStatus"] == {"exitCode": 0}
            assert "terminal_output_chunk" not in [u["sessionUpdate"] for u in replayed]
