"""One session in two windows (two ``serve`` on the bridge's daemon), against the real Codex.

Window ``a`` creates the session and prompts it once; window ``b`` loads it. Codex sends every
event of the thread to both connections, whoever started the turn: each window shows a turn the
other started (its prompt first, as the user's message), an approval is asked in both and the
first answer settles it, a cancel from either window stops the turn, and a prompt from one window
while the other's turn runs waits for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.acp_client import AcpClient
from tests.support.daemon import ATTACHED, StartDaemon, serve_argv
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.reading import Ended, states_of, text_of
from tests.support.scenarios.approvals import ESCALATED, Answers
from tests.support.scenarios.subagents import SUBAGENTS, script, spawn, wait

pytestmark = pytest.mark.e2e

#: A turn long enough to be cancelled while it streams.
LONG = "@@ words 400 delay_ms=40"


TwoWindows = Callable[..., AbstractAsyncContextManager[tuple[AcpClient, AcpClient, str]]]


@pytest.fixture
def two_windows(
    start_daemon: StartDaemon,
    runtime: Path,
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    tmp_path: Path,
    workspace: Path,
    stderr_file: Path,
) -> TwoWindows:
    """``async with two_windows(...) as (a, b, session)``: two windows on one session of the
    daemon's Codex: ``a`` created it and prompted it once, ``b`` (speaking ACP ``b_version``)
    loaded it, or with ``load`` false has not yet. ``answers``: the two windows' answers to
    what they are asked; ``capabilities``: what both declare."""

    @asynccontextmanager
    async def start(
        answers: tuple[Answers, Answers] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        b_version: int = 1,
        load: bool = True,
    ) -> AsyncIterator[tuple[AcpClient, AcpClient, str]]:
        first, second = answers or (Answers(), Answers())
        options: dict[str, Any] = {"argv": serve_argv(runtime), "capabilities": capabilities}
        if capabilities is not None:
            options["unstable"] = True
        async with (
            start_daemon(),
            open_conversation(on_request=first, **options) as a,
            open_conversation(on_request=second, session=False, version=b_version, **options) as b,
        ):
            session = a.sid
            assert await a.prompt("@@ say hello") == Ended({"stopReason": "end_turn"})
            if load and b_version == 2:
                await b.client.request(
                    "session/resume", {"sessionId": session, "cwd": str(workspace)}
                )
            elif load:
                await b.client.request(
                    "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
                )
            yield a.client, b.client, session
        assert stderr_file.read_text().count(ATTACHED) == 2, "both windows ran through the daemon"

    return start


def _since(client: AcpClient, start: int, session: str) -> list[dict[str, Any]]:
    return [u["update"] for u in client.updates[start:] if u["sessionId"] == session]


async def _until(client: AcpClient, done: Any) -> None:
    await client.wait_for(lambda _m: bool(done()))


async def test_a_turn_either_window_starts_streams_to_both_its_prompt_first_elsewhere(
    two_windows: TwoWindows,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows() as (a, b, session):
            for sender, watcher, text in ((a, b, "@@ words 5"), (b, a, "@@ say from b")):
                at_sender, at_watcher = len(sender.updates), len(watcher.updates)
                assert await sender.prompt(session, text) == Ended({"stopReason": "end_turn"})
                sent = _since(sender, at_sender, session)
                answer = text_of(sent, "agent_message_chunk")
                assert answer in ("word1 word2 word3 word4 word5", "from b")
                # The other window: the prompt as the user's message, then the same answer.
                await _until(
                    watcher,
                    lambda w=watcher, n=at_watcher, t=answer: (
                        text_of(_since(w, n, session), "agent_message_chunk") == t
                    ),
                )
                seen = _since(watcher, at_watcher, session)
                chunks = [
                    u
                    for u in seen
                    if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
                ]
                assert chunks[0]["sessionUpdate"] == "user_message_chunk"
                assert text_of(seen, "user_message_chunk") == text
                # The sender is not shown its own prompt back.
                assert text_of(sent, "user_message_chunk") == ""


async def test_an_approval_is_asked_in_both_windows_and_the_first_answer_settles_it(
    two_windows: TwoWindows, workspace: Path
) -> None:
    slow = Answers(permission="reject_once", hold=True)
    quick = Answers(permission="allow_once")
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows((slow, quick)) as (a, b, session):
            # a asks, but its user has not answered when b's does: b's answer settles it.
            assert await a.prompt(session, ESCALATED) == Ended({"stopReason": "end_turn"})
            assert (workspace / "approved.txt").exists()
            assert a.text_of(session).endswith("done")
            assert len(slow.asked_for("session/request_permission")) == 1
            assert len(quick.asked_for("session/request_permission")) == 1
            # a's question is withdrawn.
            [asked] = [
                m["id"] for m in a.received if m.get("method") == "session/request_permission"
            ]
            await a.wait_for(
                lambda m: (
                    m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked
                )
            )
            slow.release()
            await _until(b, lambda: b.text_of(session).endswith("done"))


@pytest.mark.parametrize("starter", ["a", "b"])
async def test_a_cancel_from_the_window_that_did_not_start_the_turn_stops_it(
    starter: str, two_windows: TwoWindows
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows() as (a, b, session):
            sender, other = (a, b) if starter == "a" else (b, a)
            results: dict[str, Any] = {}

            async def prompt(name: str, client: AcpClient, text: str) -> None:
                results[name] = await client.prompt(session, text)

            at = len(other.updates)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, "started", sender, LONG)
                # The other window sees the turn stream...
                await _until(
                    other,
                    lambda: "word3" in text_of(_since(other, at, session), "agent_message_chunk"),
                )
                # ... sends a prompt of its own, which waits for that turn ...
                nursery.start_soon(prompt, "queued", other, "@@ say never")
                await trio.sleep(0.5)
                assert "queued" not in results
                # ... and cancels: the turn stops, and both prompts end cancelled.
                await other.notify("session/cancel", {"sessionId": session})
            assert results == {
                "started": Ended({"stopReason": "cancelled"}),
                "queued": Ended({"stopReason": "cancelled"}),
            }
            assert "word400" not in sender.text_of(session)
            # The session takes the next prompt, from either window.
            assert await other.prompt(session, "@@ say again") == Ended({"stopReason": "end_turn"})
            assert await sender.prompt(session, "@@ say and again") == Ended(
                {"stopReason": "end_turn"}
            )


async def test_a_prompt_from_one_window_waits_for_the_others_turn_then_runs(
    two_windows: TwoWindows,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows() as (a, b, session):
            ended: list[str] = []

            async def prompt(name: str, client: AcpClient, text: str) -> None:
                assert await client.prompt(session, text) == Ended({"stopReason": "end_turn"})
                ended.append(name)

            # Each window's own count: the two saw different updates before (a the turn it
            # prompted, b its load's replay), so one index would cut one list elsewhere.
            at = {a: len(a.updates), b: len(b.updates)}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, "a", a, "@@ words 30 delay_ms=30")
                await _until(
                    b, lambda: "word2" in text_of(_since(b, at[b], session), "agent_message_chunk")
                )
                nursery.start_soon(prompt, "b", b, "@@ say after")
            assert ended == ["a", "b"]
            # Both windows see both turns, whole, in order: the other window's turn reaches
            # each on its own connection, which may be a moment behind the prompt's answer.
            for client in (a, b):
                await _until(
                    client,
                    lambda c=client: text_of(
                        _since(c, at[c], session), "agent_message_chunk"
                    ).endswith("after"),
                )
                text = text_of(_since(client, at[client], session), "agent_message_chunk")
                assert text.startswith("word1 word2") and text.endswith("word30after"), text


async def test_a_window_that_loads_the_session_mid_turn_shows_the_history_then_the_live_turn(
    two_windows: TwoWindows, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows(load=False) as (a, b, session):
            results: dict[str, Any] = {}

            async def prompt() -> None:
                results["a"] = await a.prompt(session, "@@ words 60 delay_ms=40")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await _until(a, lambda: "word10" in a.text_of(session))
                await b.request(
                    "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
                )
                # Loaded mid-turn: a prompt from b waits for the turn, and b can cancel it.
            assert results == {"a": Ended({"stopReason": "end_turn"})}
            await _until(b, lambda: b.text_of(session).endswith("word60"))
            await trio.sleep(0.5)  # nothing more (a duplicate) follows
            # b: the history, then the running turn, each once.
            assert b.text_of(session, "user_message_chunk") == "@@ say hello@@ words 60 delay_ms=40"
            assert b.text_of(session) == a.text_of(session), (
                b.text_of(session),
                a.text_of(session),
            )


def _announced(client: AcpClient, parent: str) -> list[str]:
    return [
        u["update"]["sessionId"]
        for u in client.updates
        if u["sessionId"] == parent and u["update"]["sessionUpdate"] == "subagent_update"
    ]


async def test_a_sub_agent_the_other_windows_turn_spawns_is_announced_in_both(
    two_windows: TwoWindows,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows(capabilities=SUBAGENTS) as (a, b, session):
            spawning = script(spawn("@@ say alpha reporting"), wait(), "@@ say all reported")
            assert await b.prompt(session, spawning) == Ended({"stopReason": "end_turn"})
            await _until(a, lambda: a.text_of(session).endswith("all reported"))
            [child] = set(_announced(b, session))
            assert set(_announced(a, session)) == {child}
            await _until(a, lambda: a.text_of(child) == "alpha reporting")
            assert b.text_of(child) == "alpha reporting"


async def test_a_v2_window_follows_the_other_windows_turns_and_cancels_one(
    two_windows: TwoWindows,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with two_windows(b_version=2) as (a, b, session):
            # a's turn: b shows it running, then idle with its stop reason.
            at = len(b.updates)
            assert await a.prompt(session, "@@ say two") == Ended({"stopReason": "end_turn"})
            await _until(
                b,
                lambda: (
                    Ended({"state": "idle", "stopReason": "end_turn"})
                    in states_of(_since(b, at, session))
                ),
            )
            assert states_of(_since(b, at, session)) == [
                {"state": "running"},
                Ended({"state": "idle", "stopReason": "end_turn"}),
            ]
            assert text_of(_since(b, at, session), "user_message_chunk") == "@@ say two"
            # b cancels a's next turn: a's prompt ends cancelled, b's state idle cancelled.
            at = len(b.updates)
            results: dict[str, Any] = {}

            async def prompt() -> None:
                results["a"] = await a.prompt(session, LONG)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await _until(
                    b, lambda: "word3" in text_of(_since(b, at, session), "agent_message_chunk")
                )
                await b.notify("session/cancel", {"sessionId": session})
            assert results == {"a": Ended({"stopReason": "cancelled"})}
            await _until(
                b,
                lambda: (
                    states_of(_since(b, at, session))[-1:]
                    == [Ended({"state": "idle", "stopReason": "cancelled"})]
                ),
            )


async def test_a_v2_window_is_shown_the_sub_agents_of_the_other_windows_turn(
    two_windows: TwoWindows,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        # No sub-agents declared: a is shown none.
        async with two_windows(b_version=2) as (a, b, session):
            spawning = script(spawn("@@ say alpha reporting"), wait(), "@@ say all reported")
            assert await a.prompt(session, spawning) == Ended({"stopReason": "end_turn"})
            await _until(
                b,
                lambda: text_of(_since(b, 0, session), "agent_message_chunk").endswith(
                    "all reported"
                ),
            )
            assert not _announced(a, session)
            [child] = set(_announced(b, session))
            await _until(
                b, lambda: "alpha reporting" in msgspec.json.encode(_since(b, 0, child)).decode()
            )
