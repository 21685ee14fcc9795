"""Codex's own TUI and an ACP window on one thread, with the real things: Codex's TUI driven in
tmux, the daemon it starts itself (``daemon_auto_start``), the scripted model, and ``serve`` with
no flags, which joins that daemon.

A thread the TUI started is listed and loaded live in the window; a prompt typed in the TUI
streams into the window, and the window's shows in the TUI; an approval is shown in both and
either's answer takes it off the other; the window's cancel stops the TUI's turn, the TUI's
shows in a v2 window; the bridge's daemon on the TUI's daemon shows the TUI's thread. Nowhere
an "active writer" error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.shell.codex_daemon import socket_path as codex_daemon_socket
from tests.support.codex_daemon import codex_home_processes, codex_requests
from tests.support.codex_tui import AGENT_MARK, USER_MARK, Tui, codex_tui
from tests.support.daemon import StartDaemon
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation, words
from tests.support.reading import Ended
from tests.support.scenarios.approvals import ESCALATED, Answers
from tests.test_e2e_daemon import status_json, thread_state

pytestmark = pytest.mark.e2e

#: The ``tui_and_window`` fixture.
TuiAndWindow = Callable[..., AbstractAsyncContextManager[tuple[Tui, AcpClient, str]]]

ACTIVE_WRITER = "active writer"
#: The TUI's dialog for a command's approval.
APPROVAL = "Would you like to run the following command?"


@pytest.fixture
def prompted_tui(
    tmp_path: Path, codex_home: Path, codex_bin: str, bridge_env: dict[str, str], workspace: Path
) -> Callable[[], AbstractAsyncContextManager[tuple[Tui, str]]]:
    """``async with prompted_tui() as (tui, url)``: Codex's TUI in tmux, its first prompt
    (``@@ say first``) answered; ``url``: the daemon it started at that prompt."""

    @asynccontextmanager
    async def start() -> AsyncIterator[tuple[Tui, str]]:
        async with codex_tui(
            tmp_path / "tmux.sock", codex_home, codex_bin, bridge_env, workspace
        ) as tui:
            await tui.submit("@@ say first")
            await tui.wait_for(AGENT_MARK + "first")
            yield tui, f"unix://{codex_daemon_socket(str(codex_home))}"

    return start


@pytest.fixture
def tui_and_window(
    open_conversation: OpenConversation,
    prompted_tui: Callable[[], AbstractAsyncContextManager[tuple[Tui, str]]],
    codex_home: Path,
    workspace: Path,
    stderr_file: Path,
) -> TuiAndWindow:
    """``async with tui_and_window(load=...) as (tui, window, thread)``: the TUI with a thread
    it started and prompted once (``@@ say first``), and a window (``serve`` on Codex's
    daemon, speaking the test's ACP version) that lists it and, with ``load``, has loaded it
    (an ACP v2 window: resumed it)."""

    @asynccontextmanager
    async def start(*, load: bool = True) -> AsyncIterator[tuple[Tui, AcpClient, str]]:
        async with prompted_tui() as (tui, url):
            # The TUI started Codex's daemon at its first prompt and works there: its thread is
            # loaded in the daemon (with an ephemeral one the TUI made for the thread's title).
            stored, loaded = await codex_requests(
                url, ("thread/list", {}), ("thread/loaded/list", {})
            )
            [thread] = [t["id"] for t in stored["data"]]
            assert thread in loaded["data"]
            async with open_conversation(session=False) as talk:
                window = talk.client
                listed = await window.request("session/list", {})
                # The TUI's thread, not the ephemeral one it titles it in.
                assert [s["sessionId"] for s in listed["sessions"]] == [thread]
                if load and talk.version == 2:
                    await window.request(
                        "session/resume", {"sessionId": thread, "cwd": str(workspace)}
                    )
                elif load:
                    await window.request(
                        "session/load",
                        {"sessionId": thread, "cwd": str(workspace), "mcpServers": []},
                    )
                    assert window.text_of(thread) == "first"
                yield tui, window, thread
                history = await tui.history()
            assert ACTIVE_WRITER not in history, history
        assert "Codex: Codex's daemon on " in stderr_file.read_text()
        assert ACTIVE_WRITER not in stderr_file.read_text()
        assert not codex_home_processes(codex_home)

    return start


@asynccontextmanager
async def asked_in_both(
    tui_and_window: TuiAndWindow, permission: str
) -> AsyncIterator[tuple[Tui, AcpClient, str, Answers]]:
    """The TUI and its window, the TUI's turn running the escalated command: the window is
    asked (its answer, ``permission``, held until released) and so is the TUI (its dialog
    shown). Bounded by ``SCENARIO_SECONDS``."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with tui_and_window() as (tui, window, thread):
            answers = Answers(permission=permission, hold=True)
            window.on_request = answers
            await tui.submit(ESCALATED)
            await answers.asked.wait()
            await tui.wait_for(APPROVAL)
            yield tui, window, thread, answers


def agent_kinds(updates: list[dict[str, Any]]) -> list[str]:
    """The message chunks' kinds, each run of one kind once."""
    kinds: list[str] = []
    for update in updates:
        kind = update["update"]["sessionUpdate"]
        if kind in ("user_message_chunk", "agent_message_chunk") and kinds[-1:] != [kind]:
            kinds.append(kind)
    return kinds


async def test_a_tui_thread_is_loaded_live_and_the_tui_s_prompts_stream_into_the_window(
    tui_and_window: TuiAndWindow, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with tui_and_window(load=False) as (tui, window, thread):
            # The window opens the thread while a turn typed in the TUI runs: the history,
            # then the rest of the turn live, each once.
            await tui.submit("@@ words 60 delay_ms=50")
            await tui.wait_for("word5 ")
            await window.request(
                "session/load", {"sessionId": thread, "cwd": str(workspace), "mcpServers": []}
            )
            await window.wait_for(lambda _m: window.text_of(thread).endswith("word60"))
            assert window.text_of(thread) == "first" + words(60)
            assert window.text_of(thread, "user_message_chunk") == (
                "@@ say first@@ words 60 delay_ms=50"
            )
            await tui.wait_for("word60")
            # The TUI's next prompt streams into the window: its text first, then the answer.
            at = len(window.updates)
            await tui.submit("@@ words 40 delay_ms=20")
            await window.wait_for(lambda _m: window.text_of(thread).endswith("word40"))
            assert window.text_of(thread).endswith(words(60) + words(40))
            assert window.text_of(thread, "user_message_chunk").endswith("@@ words 40 delay_ms=20")
            assert agent_kinds(window.updates[at:]) == ["user_message_chunk", "agent_message_chunk"]
            # And the other way: the window's prompt is a turn the TUI shows.
            assert await window.prompt(thread, "@@ say from the editor") == Ended(
                {"stopReason": "end_turn"}
            )
            await tui.wait_until(
                lambda s: (
                    USER_MARK + "@@ say from the editor" in s
                    and AGENT_MARK + "from the editor" in s
                ),
                "the window's turn",
            )
            assert ACTIVE_WRITER not in str(window.received)


async def test_an_approval_of_a_tui_turn_answered_in_the_window_leaves_the_tui(
    tui_and_window: TuiAndWindow, workspace: Path
) -> None:
    # Asked in both: the window's request, the TUI's dialog.
    async with asked_in_both(tui_and_window, "allow_once") as (tui, window, thread, answers):
        [(method, asked)] = answers.requests
        assert method == "session/request_permission" and asked["sessionId"] == thread
        answers.release()
        await tui.wait_gone(APPROVAL)
        await window.wait_for(lambda _m: window.text_of(thread).endswith("done"))
        await tui.wait_for(AGENT_MARK + "done")
        assert (workspace / "approved.txt").exists()


async def test_an_approval_answered_in_the_tui_is_withdrawn_from_the_window(
    tui_and_window: TuiAndWindow, workspace: Path
) -> None:
    async with asked_in_both(tui_and_window, "reject_once") as (tui, window, thread, answers):
        await tui.tmux("send-keys", "-t", tui.session, "y")  # "Yes, proceed"
        [asked] = [
            m["id"] for m in window.received if m.get("method") == "session/request_permission"
        ]
        await window.wait_for(
            lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked
        )
        await tui.wait_for(AGENT_MARK + "done")
        await window.wait_for(lambda _m: window.text_of(thread).endswith("done"))
        assert (workspace / "approved.txt").exists()
        answers.release()  # too late: the TUI's answer settled it


async def test_a_cancel_in_the_window_stops_the_tui_s_turn(
    tui_and_window: TuiAndWindow, codex_home: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with tui_and_window() as (tui, window, thread):
            await tui.submit("@@ words 3000 delay_ms=10")
            await window.wait_for(lambda _m: "word20 " in window.text_of(thread))
            await window.notify("session/cancel", {"sessionId": thread})
            await tui.wait_for("Conversation interrupted")
            url = f"unix://{codex_daemon_socket(str(codex_home))}"
            [read] = await codex_requests(
                url, ("thread/read", {"threadId": thread, "includeTurns": True})
            )
            assert read["thread"]["turns"][-1]["status"] == "interrupted"
            assert not window.text_of(thread).endswith("word3000")
            # The thread goes on: the next prompt typed in the TUI is answered in both.
            await tui.submit("@@ say after")
            await window.wait_for(lambda _m: window.text_of(thread).endswith("after"))
            await tui.wait_for(AGENT_MARK + "after")


def states(window: AcpClient, thread: str, start: int) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in u["update"].items() if k != "sessionUpdate"}
        for u in window.updates[start:]
        if u["sessionId"] == thread and u["update"]["sessionUpdate"] == "state_update"
    ]


@pytest.mark.acp_versions(2)
async def test_a_v2_window_follows_the_tui_s_turns_and_the_tui_s_cancel(
    tui_and_window: TuiAndWindow,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with tui_and_window() as (tui, window, thread):
            ended = Ended({"state": "idle", "stopReason": "end_turn"})
            at = len(window.updates)
            await tui.submit("@@ say second")
            await window.wait_for(lambda _m: ended in states(window, thread, at))
            assert states(window, thread, at) == [{"state": "running"}, ended]
            # The TUI's own cancel (Esc): the window shows the turn ended cancelled.
            cancelled = Ended({"state": "idle", "stopReason": "cancelled"})
            at = len(window.updates)
            await tui.submit("@@ words 3000 delay_ms=10")
            await window.wait_for(lambda _m: "word20 " in window.text_of(thread))
            await tui.tmux("send-keys", "-t", tui.session, "Escape")
            await tui.wait_for("Conversation interrupted")
            await window.wait_for(lambda _m: cancelled in states(window, thread, at))
            assert states(window, thread, at) == [{"state": "running"}, cancelled]


async def test_the_bridge_s_daemon_on_the_tui_s_daemon_shows_the_tui_s_thread(
    start_daemon: StartDaemon,
    prompted_tui: Callable[[], AbstractAsyncContextManager[tuple[Tui, str]]],
    runtime: Path,
    bridge_env: dict[str, str],
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with prompted_tui() as (tui, url):
            [stored] = await codex_requests(url, ("thread/list", {}))
            [thread] = [t["id"] for t in stored["data"]]
            async with start_daemon() as (_, info):
                assert info.url == url  # no second app-server on this CODEX_HOME
                await thread_state(bridge_env, runtime, thread, "idle")
                await tui.submit("@@ words 200 delay_ms=20")
                await thread_state(bridge_env, runtime, thread, "running")
                await thread_state(bridge_env, runtime, thread, "idle")
                # Only the user's thread: not the ephemeral one the TUI makes for its title.
                status = await status_json(bridge_env, runtime)
                assert [t["threadId"] for t in status["threads"]] == [thread], status
