"""``codex-acp-bridge daemon`` and ``serve`` attached to it, against the real Codex.

What a user relies on: the daemon keeps its runtime directory private and
refuses a second daemon; an editor's ``serve`` attaches to it; an editor killed
while Codex waits on a permission leaves the work waiting, and a new ``serve``
that loads the session is asked and completes it; two editors work side by
side; a Codex the daemon restarts is followed by the attached editors; SIGTERM
stops the daemon and its Codex.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge.acp_client import AcpClient, open_agent
from bridge.codex.versions import PINNED
from bridge.daemon.runtime import read_status
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.daemon import (
    ATTACHED,
    StartDaemon,
    daemon_info,
    daemon_refused,
    running_daemon,
    serve_argv,
)
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios.approvals import ESCALATED, Answers
from tests.support.scenarios.recovery import codex_processes

pytestmark = pytest.mark.e2e


async def test_the_daemon_is_private_single_and_stops_with_its_codex_on_sigterm(
    bridge_env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with trio.fail_after(SCENARIO_SECONDS):
        async with running_daemon(bridge_env, runtime, log) as (daemon, info):
            assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
            for name in ("daemon.json", "token", "daemon.lock"):
                assert stat.S_IMODE((runtime / name).stat().st_mode) == 0o600, name
            assert info.pid == daemon.pid and info.url.startswith("ws://127.0.0.1:")
            assert PINNED in info.codexVersion
            codex = codex_processes(daemon.pid)
            # Codex itself (its binary), not the guard the daemon runs it under nor the node
            # launcher. (Not "the deepest app-server": a Codex may briefly run a helper of
            # its own binary with the same arguments below itself.)
            assert codex and info.codexPid in codex
            assert b"bridge.daemon.guard" not in Path(f"/proc/{info.codexPid}/cmdline").read_bytes()
            assert Path(f"/proc/{info.codexPid}/exe").resolve().name.startswith("codex")
            # A second daemon on the same directory: one clear line, exit 1.
            assert await daemon_refused(bridge_env, runtime) == (
                f"codex-acp-bridge daemon: a daemon already runs on {runtime} (pid {daemon.pid})"
            )
            daemon.send_signal(signal.SIGTERM)
            assert await daemon.wait() == 0
            assert not (runtime / "daemon.json").exists()
            for pid in codex:
                assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"Codex {pid} survived"
        # A daemon killed (SIGKILL) takes its Codex with it; its directory is reused.
        async with running_daemon(bridge_env, runtime, log) as (daemon, _info):
            codex = codex_processes(daemon.pid)
            daemon.kill()
            await daemon.wait()
            while any(not _zombie(pid) for pid in codex):  # noqa: ASYNC110 (polls /proc)
                await trio.sleep(0.05)
        async with running_daemon(bridge_env, runtime, log) as (_daemon, info):
            assert info.state == "running"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


async def left_waiting(open_conversation: OpenConversation, runtime: Path, version: int) -> str:
    """An editor speaking ACP ``version`` through the daemon, killed while Codex asks it about
    its prompt's command: the session it leaves, the work in it waiting on the question."""
    held = Answers(permission="allow_once", hold=True)
    argv = serve_argv(runtime)
    async with (
        open_conversation(argv=argv, on_request=held, version=version) as first,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_prompt_ignoring_loss, first, ESCALATED)
        await held.asked.wait()
        # The editor dies; Codex's turn goes on, waiting on the question.
        first.process.kill()
        nursery.cancel_scope.cancel()  # its prompt will never be answered
    return first.sid


async def test_an_editor_killed_while_codex_waits_leaves_the_work_for_the_next_one(
    start_daemon: StartDaemon,
    open_conversation: OpenConversation,
    runtime: Path,
    workspace: Path,
    stderr_file: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon():
            session = await left_waiting(open_conversation, runtime, 1)
            assert ATTACHED in stderr_file.read_text()
            assert not (workspace / "approved.txt").exists()
            answers = Answers(permission="allow_once")
            argv = serve_argv(runtime)
            async with open_conversation(argv=argv, on_request=answers, session=False) as talk:
                second = talk.client
                listed = await second.request("session/list", {})
                assert session in [s["sessionId"] for s in listed["sessions"]]
                await second.request(
                    "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
                )
                # The question that waited is asked again, and answering it completes the work.
                await second.wait_for(lambda _m: bool(answers.requests))
                [(method, params)] = answers.requests
                assert method == "session/request_permission" and params["sessionId"] == session
                await second.wait_for(lambda _m: (workspace / "approved.txt").exists())
                await second.wait_for(lambda _m: second.text_of(session).endswith("done"))


async def _prompt_ignoring_loss(talk: Conversation, text: str) -> None:
    with contextlib.suppress(Exception):  # the editor is killed mid-prompt
        await talk.said(text)


async def test_two_editors_work_side_by_side_on_one_daemon(
    start_daemon: StartDaemon, open_conversation: OpenConversation, runtime: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon() as (daemon, _):
            async with (
                open_conversation(argv=serve_argv(runtime)) as first,
                open_conversation(argv=serve_argv(runtime)) as second,
            ):
                (a, sa), (b, sb) = (first.client, first.sid), (second.client, second.sid)
                results: dict[str, Any] = {}

                async def run(client: AcpClient, session: str, text: str) -> None:
                    results[session] = await client.prompt(session, text)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run, a, sa, "@@ words 200 delay_ms=2")
                    nursery.start_soon(run, b, sb, "@@ words 150 delay_ms=2")
                assert results == {
                    sa: Ended({"stopReason": "end_turn"}),
                    sb: Ended({"stopReason": "end_turn"}),
                }
                assert len(a.text_of(sa).split()) == 200 and len(b.text_of(sb).split()) == 150
                # Neither editor is shown the other's session.
                assert sb not in msgspec.json.encode(a.received).decode()
                assert sa not in msgspec.json.encode(b.received).decode()
            # Both used the daemon's one Codex.
            assert len(codex_processes(daemon.pid)) >= 1


async def test_an_attached_editor_follows_the_daemons_restarted_codex(
    start_daemon: StartDaemon, open_conversation: OpenConversation, runtime: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon() as (daemon, info),
            open_conversation(argv=serve_argv(runtime)) as talk,
        ):
            client, session, process = talk.client, talk.sid, talk.process
            assert await client.prompt(session, "@@ say one") == Ended({"stopReason": "end_turn"})
            for pid in codex_processes(daemon.pid):
                # Codex's launcher exits by itself once the binary under it dies.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            restarted = await daemon_info(runtime, old=info.codexPid)
            assert restarted.url  # perhaps another port: serve re-reads daemon.json
            assert await client.prompt(session, "@@ say two") == Ended({"stopReason": "end_turn"})
            assert client.text_of(session).endswith("two")
            assert process.poll() is None


async def status_json(env: dict[str, str], runtime: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime), "--json"]
    done = await trio.run_process(argv, env=env, capture_stdout=True, capture_stderr=True)
    parsed: dict[str, Any] = msgspec.json.decode(done.stdout)
    return parsed


async def thread_state(
    env: dict[str, str], runtime: Path, thread: str, want: str
) -> dict[str, Any]:
    while True:
        for line in (await status_json(env, runtime))["threads"]:
            if line["threadId"] == thread and line["state"] == want:
                return dict(line)
        await trio.sleep(0.1)


async def test_status_shows_what_every_thread_is_doing_and_says_when_no_daemon_runs(
    start_daemon: StartDaemon,
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    runtime: Path,
    workspace: Path,
) -> None:
    held = Answers(permission="allow_once", hold=True)
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon() as (daemon, _info),
            open_conversation(argv=serve_argv(runtime), on_request=held) as talk,
        ):
            client, session = talk.client, talk.sid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, session, "@@ words 400 delay_ms=10")
                running = await thread_state(bridge_env, runtime, session, "running")
                assert not running.get("waitingOn")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.prompt, session, ESCALATED)
                await held.asked.wait()
                waiting = await thread_state(bridge_env, runtime, session, "requires_action")
                assert waiting["waitingOn"] == ["approval"]
                assert waiting["cwd"] == str(workspace)
                assert waiting["title"] == "@@ words 400 delay_ms=10"  # its first message
                text = await trio.run_process(
                    [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime)],
                    env=bridge_env,
                    capture_stdout=True,
                )
                shown = text.stdout.decode()
                assert shown.startswith(f"daemon {daemon.pid} ·") and "needs approval" in shown
                held.release()
            idle = await thread_state(bridge_env, runtime, session, "idle")
            assert idle["threadId"] == session
            report = await status_json(bridge_env, runtime)
            assert report["daemon"]["pid"] == daemon.pid and report["daemon"]["state"] == "running"
    # No daemon: a non-zero exit and one line saying so.
    gone = await trio.run_process(
        [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime), "--json"],
        env=bridge_env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert gone.returncode == 1 and gone.stdout == b""
    assert gone.stderr.decode() == f"codex-acp-bridge status: no daemon runs on {runtime}\n"


async def test_status_watch_redraws_when_a_thread_changes(
    start_daemon: StartDaemon,
    bridge_env: dict[str, str],
    runtime: Path,
    workspace: Path,
    tmp_path: Path,
) -> None:
    log = tmp_path / "bridge.log"
    argv = [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime), "--watch"]
    with trio.fail_after(SCENARIO_SECONDS), log.open("ab") as out:
        async with (
            start_daemon() as (daemon, _info),
            open_agent(serve_argv(runtime), env=bridge_env, stderr=out.fileno()) as (client, _p),
        ):
            watch = await trio.lowlevel.open_process(
                argv, env=bridge_env, stdout=subprocess.PIPE, stderr=out.fileno()
            )
            assert watch.stdout is not None
            shown = b""
            try:
                while b"daemon" not in shown:
                    shown += await watch.stdout.receive_some(65536)
                assert f"daemon {daemon.pid}".encode() in shown
                await client.initialize()
                session = await client.new_session(str(workspace))
                assert await client.prompt(session, "@@ say watched") == Ended(
                    {"stopReason": "end_turn"}
                )
                # Redrawn without being asked: the new thread, titled by its first message.
                while b"@@ say watched" not in shown:
                    shown += await watch.stdout.receive_some(65536)
                assert shown.count(b"daemon ") >= 2
            finally:
                watch.kill()
                await watch.wait()


async def test_a_v2_editor_picks_up_work_a_killed_v2_editor_left_waiting(
    start_daemon: StartDaemon, open_conversation: OpenConversation, runtime: Path, workspace: Path
) -> None:
    """ACP v2 through the daemon: the session is open (Codex holds it), a resume with replay
    says the work is still going, the question is asked again, and answering it ends it."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon():
            session = await left_waiting(open_conversation, runtime, 2)
            answers = Answers(permission="allow_once")
            argv = serve_argv(runtime)
            async with open_conversation(
                argv=argv, on_request=answers, session=False, version=2
            ) as talk:
                second = talk.client
                status = await second.request("session/status", {"sessionId": session})
                assert status == {"status": "open"}
                await second.request(
                    "session/resume",
                    {"sessionId": session, "cwd": str(workspace), "replayFrom": {"type": "start"}},
                )
                resumed = next(
                    m["params"]["update"]["state"]
                    for m in second.received
                    if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "state_update"
                )
                assert resumed in ("running", "requires_action")
                await second.wait_for(lambda _m: bool(answers.requests))
                [(method, params)] = answers.requests
                assert method == "session/request_permission" and params["sessionId"] == session
                assert params["subject"]["type"] == "tool_call"
                ended = await second.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"].get("state") == "idle"
                    )
                )
                assert ended["params"]["update"]["stopReason"] == "end_turn"
                assert (workspace / "approved.txt").exists()


async def _first_answer(argv: list[str], env: dict[str, str], workspace: Path, log: Path) -> str:
    """Run ``serve`` for one session and one prompt; what it said on stderr about its Codex."""
    with log.open("wb") as out:
        async with open_agent(argv, env=env, stderr=out.fileno()) as (client, _process):
            await client.initialize()
            session = await client.new_session(str(workspace))
            assert await client.prompt(session, "@@ say hello") == Ended({"stopReason": "end_turn"})
    said = [line for line in log.read_text().splitlines() if "Codex: " in line]
    assert len(said) == 1, said
    return said[0]


async def test_serve_attaches_only_to_a_daemon_running_the_codex_its_editor_asked_for(
    start_daemon: StartDaemon,
    bridge_env: dict[str, str],
    codex_bin: str,
    runtime: Path,
    workspace: Path,
    tmp_path: Path,
    scripted_model: ScriptedModel,
) -> None:
    """Another CODEX_HOME, or another --codex-bin, and serve runs a Codex of its own; the
    same ones, and it attaches. Either way one line on stderr, at the default log level,
    says which Codex and why."""
    argv = [sys.executable, "-m", "bridge", "serve", "--runtime-dir", str(runtime)]
    other_home = tmp_path / "other-home"
    write_codex_home(other_home, scripted_model.base_url)
    # Another path to the same Codex would be the same binary: a copy is another one.
    other_bin = tmp_path / "bin" / "codex"
    other_bin.parent.mkdir()
    other_bin.write_text(f'#!/bin/sh\nexec {codex_bin} "$@"\n')
    other_bin.chmod(0o755)
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon() as (daemon, info):
            home = str(Path(bridge_env["CODEX_HOME"]).resolve())
            assert info.codexHome == home
            assert info.codexBin == os.path.realpath(codex_bin)

            def threads_of_daemon() -> set[str]:
                return {t["threadId"] for t in read_status(runtime)}

            attached = await _first_answer(argv, bridge_env, workspace, tmp_path / "same.log")
            assert attached.startswith("codex-acp-bridge: Codex: the daemon's at ")
            assert info.url in attached and f"daemon pid {daemon.pid}" in attached
            assert f"Codex pid {info.codexPid}" in attached
            seen = threads_of_daemon()
            assert seen, "the session was the daemon's Codex's"

            env = {**bridge_env, "CODEX_HOME": str(other_home)}
            own = await _first_answer(argv, env, workspace, tmp_path / "home.log")
            assert own.startswith(f"codex-acp-bridge: Codex: its own, {codex_bin}")
            assert f"not the daemon's (pid {daemon.pid})" in own
            assert f"the daemon serves CODEX_HOME {home}, not {other_home.resolve()}" in own

            argv_bin = [*argv, "--codex-bin", str(other_bin)]
            own = await _first_answer(argv_bin, bridge_env, workspace, tmp_path / "bin.log")
            assert f"--codex-bin names {other_bin}, the daemon runs {info.codexBin}" in own
            # Neither session reached the daemon's Codex (each serve has exited: none will).
            assert threads_of_daemon() == seen
            assert (await daemon_info(runtime)).codexPid == info.codexPid
