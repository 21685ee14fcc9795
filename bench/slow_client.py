"""A client that stops reading mid-answer: memory while it is paused, time to catch up after.

One long streamed answer (``@@ words N``, one delta per word, from the real
``codex app-server`` against the scripted model on 127.0.0.1) goes to a bare ACP client
that reads the first chunk, then stops reading for ``--pause`` seconds, then reads
everything. While it is paused, the resident memory of every process involved (the
bridge and what it started, and the Codex it attached to) is summed every 50 ms.
Printed: peak memory, the time from resuming to the prompt's answer, how many messages
carried the answer, the CPU time the bridge spent from the prompt to its answer (for
``daemon``: the daemon's and the serving process's; never Codex's), and whether the text is
byte-identical to the model's.

``--via`` picks how the bridge reaches Codex: ``stdio`` (it spawns its own), ``url``
(``--codex-url`` to an ``app-server --listen ws://``), ``unix`` (``--codex-url unix://``
to Codex's own daemon, ``codex app-server daemon``, on its Unix socket), ``daemon``
(through ``codex-acp-bridge daemon``). Each transport should merge and catch up as stdio
does. Targets: peak <= 150 MB, caught up <= 0.5 s, the prompt ends ``end_turn`` with the
whole text, the WebSocket (url, unix, daemon) stays open.

``--bridge LABEL=DIR`` (repeatable) runs the bridge from another checkout's sources
(``DIR`` put first on ``PYTHONPATH``; ``.``: this one), each transport once per bridge in
turn, so two versions are compared under the same conditions; a table sums up the runs.

    .venv/bin/python bench/slow_client.py [--words N] [--pause S]
        [--via stdio|url|unix|daemon]... [--bridge LABEL=DIR]...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import trio

from bridge.daemon.daemon import app_server_ready, free_port
from bridge.daemon.runtime import running_daemon
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.scripted_model.directives import words_text
from bridge.shell.codex_daemon import socket_path as codex_daemon_socket
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex
from bridge.shell.streams import LineStream


def tree_rss(roots: list[int]) -> int:
    """Resident bytes of ``roots`` and all their descendants (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    total, seen, todo = 0, set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, []))
        total += rss(pid)
    return total


def rss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` itself has used (its children not counted)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


@dataclass
class Result:
    peak_rss: int
    #: The bridge's own process alone (for daemon: the serve process), at that peak.
    bridge_rss: int
    caught_up: float
    messages: int
    #: CPU seconds of the bridge's processes from the prompt to its answer.
    bridge_cpu: float
    stop_reason: str
    identical: bool
    error: str | None


@contextlib.asynccontextmanager
async def codex_side(
    via: str, codex_bin: str, env: dict[str, str], tmp: Path
) -> AsyncIterator[tuple[list[str], list[int]]]:
    """What ``serve`` needs to reach Codex (extra argv), and the pids of what runs it."""
    if via == "stdio":
        yield ["--no-daemon"], []
        return
    if via == "url":
        port = free_port()
        # The native binary itself: killing npm's Node launcher would leave it running.
        launch = codex_launch(codex_bin, env)
        process = await trio.lowlevel.open_process(
            [launch.program, "app-server", "--listen", f"ws://127.0.0.1:{port}"],
            env=launch.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with trio.fail_after(30):
                while not await app_server_ready(port):  # noqa: ASYNC110 (HTTP: poll)
                    await trio.sleep(0.05)
            yield ["--codex-url", f"ws://127.0.0.1:{port}"], [process.pid]
        finally:
            process.kill()
            await process.wait()
        return
    if via == "unix":
        async with codex_daemon(codex_bin, env) as (url, pid):
            yield ["--codex-url", url], [pid]
        return
    runtime = tmp / "runtime"
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(runtime)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(30):
            while (info := running_daemon(runtime)) is None or info.state != "running":  # noqa: ASYNC110 (a file another process writes)
                await trio.sleep(0.05)
        yield ["--runtime-dir", str(runtime)], [process.pid]
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        if process.poll() is None:
            process.kill()


@contextlib.asynccontextmanager
async def codex_daemon(codex_bin: str, env: dict[str, str]) -> AsyncIterator[tuple[str, int]]:
    """Codex's own daemon on ``env``'s ``CODEX_HOME``: its ``unix://`` URL and pid; at the end
    stopped, and every process of that home (its updater too) ended."""
    home = env["CODEX_HOME"]

    async def command(word: str) -> dict[str, object]:
        with trio.fail_after(30):
            done = await trio.run_process(
                [codex_bin, "app-server", "daemon", word],
                env=env,
                capture_stdout=True,
                stderr=subprocess.DEVNULL,
            )
        return msgspec.json.decode(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    try:
        started = await command("start")
        yield f"unix://{codex_daemon_socket(home)}", int(started["pid"])  # type: ignore[call-overload]
    finally:
        with trio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await command("stop")
            for signum in (signal.SIGTERM, signal.SIGKILL):
                for pid in home_processes(home):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signum)
                with trio.move_on_after(3):
                    while home_processes(home):  # noqa: ASYNC110 (polls /proc)
                        await trio.sleep(0.05)


def home_processes(home: str) -> list[int]:
    """Live Codex processes run with ``home`` as ``CODEX_HOME`` (or from it)."""
    marker = f"CODEX_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, IndexError):
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            if b"codex" in cmdline and (
                marker in environ.split(b"\0") or cmdline.startswith(home.encode())
            ):
                found.append(int(entry.name))
    return found


async def one_run(model: ScriptedModel, via: str, words: int, pause: float, source: str) -> Result:
    codex_bin = find_codex()
    with tempfile.TemporaryDirectory(prefix="bench-slow-") as name:
        tmp = Path(name)
        home, cwd = tmp / "home", tmp / "work"
        cwd.mkdir()
        write_codex_home(home, model.base_url)
        env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
        env.pop("OPENAI_API_KEY", None)
        if source != ".":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
        async with codex_side(via, codex_bin, env, tmp) as (argv, codex_pids):
            # Through the daemon, the engine runs there; attached (url), that pid is Codex.
            bridge_pids = codex_pids if via == "daemon" else []
            return await _client(argv, codex_pids, bridge_pids, env, str(cwd), words, pause)


async def _client(
    argv: list[str],
    codex_pids: list[int],
    bridge_pids: list[int],
    env: dict[str, str],
    cwd: str,
    words: int,
    pause: float,
) -> Result:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bridge", "serve", "--log-level", "error", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin and process.stdout
    stream = LineStream(process.stdout, process.stdin)
    pids = [process.pid, *codex_pids]
    bridge_pids = [process.pid, *bridge_pids]
    peak = bridge_peak = 0

    async def sample(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal peak, bridge_peak
        task_status.started()
        while True:
            peak = max(peak, tree_rss(pids))
            bridge_peak = max(bridge_peak, rss(process.pid))
            await trio.sleep(0.05)

    async def call(rid: int, method: str, params: object) -> dict[str, object]:
        await stream.send(
            msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        )
        while True:
            message = msgspec.json.decode(await stream.receive())
            if message.get("id") == rid:
                return message  # type: ignore[no-any-return]

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(sample)
            await call(1, "initialize", {"protocolVersion": 1})
            new = await call(2, "session/new", {"cwd": cwd, "mcpServers": []})
            session = new["result"]["sessionId"]  # type: ignore[index]
            prompt = [{"type": "text", "text": f"@@ words {words}"}]
            cpu_before = sum(map(cpu_seconds, bridge_pids))
            await stream.send(
                msgspec.json.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "session/prompt",
                        "params": {"sessionId": session, "prompt": prompt},
                    }
                )
            )
            pieces: list[str] = []
            messages = 0
            paused = False
            while True:
                message = msgspec.json.decode(await stream.receive())
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "agent_message_chunk":
                    pieces.append(update["content"]["text"])
                    messages += 1
                    if not paused:
                        paused = True
                        await trio.sleep(pause)  # reads nothing: the pipe fills up
                        resumed = time.perf_counter()
                elif message.get("id") == 3:
                    break
            caught_up = time.perf_counter() - resumed
            bridge_cpu = sum(map(cpu_seconds, bridge_pids)) - cpu_before
            nursery.cancel_scope.cancel()
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(5):
            await process.wait()
        if process.poll() is None:
            process.kill()
    text = "".join(pieces)
    result = message.get("result") or {}
    return Result(
        peak_rss=peak,
        bridge_rss=bridge_peak,
        caught_up=caught_up,
        messages=messages,
        bridge_cpu=bridge_cpu,
        stop_reason=str(result.get("stopReason")),
        identical=text == words_text(words),
        error=None if "error" not in message else str(message["error"]),
    )


async def main(words: int, pause: float, via: list[str], bridges: list[tuple[str, str]]) -> None:
    rows = []
    async with trio.open_nursery() as nursery:
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        for mode in via:
            for label, source in bridges:
                r = await one_run(model, mode, words, pause, source)
                rows.append((mode, label, r))
                print(
                    f"{mode:>6} {label}: {words:,} deltas, client paused {pause:g} s: "
                    f"peak {r.peak_rss / 1e6:.0f} MB (bridge + Codex; bridge alone "
                    f"{r.bridge_rss / 1e6:.0f} MB), "
                    f"caught up {r.caught_up:.2f} s after resuming, "
                    f"{r.messages:,} chunks, bridge CPU {r.bridge_cpu:.1f} s, "
                    f"stop {r.stop_reason}, text {'identical' if r.identical else 'DIFFERENT'}"
                    + (f", error {r.error}" if r.error else ""),
                    flush=True,
                )
        nursery.cancel_scope.cancel()
    print(f"\n{words:,} deltas, client paused {pause:g} s")
    head = ("via", "bridge", "chunks", "caught up", "bridge CPU", "peak", "text")
    lines = [
        (
            mode,
            label,
            f"{r.messages:,}",
            f"{r.caught_up:.2f} s",
            f"{r.bridge_cpu:.1f} s",
            f"{r.peak_rss / 1e6:.0f} MB",
            ("identical" if r.identical else "DIFFERENT") + (" ERROR" if r.error else ""),
        )
        for mode, label, r in rows
    ]
    widths = [max(len(str(row[i])) for row in [head, *lines]) for i in range(len(head))]
    for row in [head, tuple("-" * w for w in widths), *lines]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def bridge_source(value: str) -> tuple[str, str]:
    label, _, directory = value.partition("=")
    return label, (directory or ".")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--pause", type=float, default=20.0)
    parser.add_argument(
        "--via",
        choices=["stdio", "url", "unix", "daemon"],
        action="append",
        help="(repeatable; all four)",
    )
    parser.add_argument(
        "--bridge",
        type=bridge_source,
        action="append",
        metavar="LABEL=DIR",
        help="run the bridge from DIR's sources (repeatable; default: this checkout)",
    )
    args = parser.parse_args()
    trio.run(
        main,
        args.words,
        args.pause,
        args.via or ["stdio", "url", "unix", "daemon"],
        args.bridge or [("this", ".")],
    )
