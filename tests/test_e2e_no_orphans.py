"""No process is left behind: ``serve`` ends with its editor, and stops the Codex it spawned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tests.support.e2e import SCENARIO_SECONDS
from tests.support.scenarios.recovery import codex_processes

pytestmark = pytest.mark.e2e


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def gone_within(pids: list[int], seconds: float) -> float:
    """Seconds until none of ``pids`` runs; fails past ``seconds``."""
    start = time.monotonic()
    with trio.fail_after(seconds):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 (processes of others: poll)
            await trio.sleep(0.02)
    return time.monotonic() - start


async def started_bridge(
    argv: list[str], env: dict[str, str], log: Path, **kw: object
) -> trio.Process:
    with log.open("ab") as out:
        return await trio.lowlevel.open_process(argv, env=env, stderr=out, **kw)  # type: ignore[arg-type]


async def wait_for_codex(bridge: int) -> list[int]:
    while not (codex := codex_processes(bridge)):  # noqa: ASYNC110 (polls /proc)
        await trio.sleep(0.05)
    return codex


async def test_serve_exits_within_a_second_of_its_stdin_closing_and_takes_its_codex(
    bridge_argv: list[str], bridge_env: dict[str, str], stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        process = await started_bridge(
            bridge_argv, bridge_env, stderr_file, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert process.stdin is not None
        init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        listed = b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}\n'
        await process.stdin.send_all(init + listed)
        assert process.stdout is not None
        out = b""
        while b'"id":2' not in out:  # session/list is answered once Codex is up
            out += await process.stdout.receive_some(65536)
        codex = await wait_for_codex(process.pid)
        await process.stdin.aclose()
        took = await gone_within([process.pid, *codex], 5)
        # Gone, not orphaned: the time is printed, not asserted (a loaded machine sets it).
        print(f"serve and its Codex gone {took:.3f} s after stdin closed")
        assert await process.wait() == 0


async def test_serve_exits_when_the_editor_that_started_it_dies(
    bridge_argv: list[str], bridge_env: dict[str, str], stderr_file: Path
) -> None:
    """The editor dies without closing the bridge's stdin (another process keeps it open)."""
    read_end, write_end = os.pipe()
    launcher = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen({bridge_argv!r}, stdin={read_end}, stdout=subprocess.DEVNULL,"
        f" pass_fds=[{read_end}])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    try:
        with trio.fail_after(SCENARIO_SECONDS):
            editor = await started_bridge(
                [sys.executable, "-c", launcher],
                bridge_env,
                stderr_file,
                stdout=subprocess.PIPE,
                pass_fds=[read_end],
            )
            assert editor.stdout is not None
            bridge = int((await editor.stdout.receive_some(64)).split()[0])
            codex = await wait_for_codex(bridge)
            os.kill(editor.pid, signal.SIGKILL)
            await editor.wait()
            took = await gone_within([bridge, *codex], 5)
            print(f"serve and its Codex gone {took:.3f} s after their editor")
    finally:
        os.close(read_end)
        os.close(write_end)
    assert "is gone; stopping" in stderr_file.read_text()
