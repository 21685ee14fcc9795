"""End-to-end overhead: a long streamed answer through the bridge vs. straight from Codex.

Both sides run the real ``codex app-server`` against the scripted model on
127.0.0.1, streaming ``@@ words N`` (one delta per word). "direct" is a bare
Python JSON-RPC client on app-server's stdio; "bridge" is the same kind of bare client
speaking ACP to ``codex-acp-bridge serve``, which talks to its own app-server. Each run
times one prompt, from sending it to its end (``turn/completed`` directly, the
``session/prompt`` response through the bridge); runs alternate, and the
median ratio is printed. Target: bridge/direct <= 1.05.

    .venv/bin/python bench/stream_overhead.py [--words N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import trio

from bridge.scripted_model import write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex
from bridge.shell.streams import LineStream


async def direct_run(codex_bin: str, env: dict[str, str], cwd: str, words: int) -> float:
    launch = codex_launch(codex_bin, env)  # the same binary the bridge runs
    process = await trio.lowlevel.open_process(
        [launch.program, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=launch.env,
    )
    assert process.stdin and process.stdout
    stream = LineStream(process.stdout, process.stdin)
    next_id = 0

    async def call(method: str, params: object) -> dict[str, object]:
        nonlocal next_id
        next_id += 1
        rid = next_id
        await stream.send(msgspec.json.encode({"id": rid, "method": method, "params": params}))
        while True:
            message = msgspec.json.decode(await stream.receive())
            if message.get("id") == rid and "method" not in message:
                return message  # type: ignore[no-any-return]

    await call("initialize", {"clientInfo": {"name": "bench-direct", "version": "1"}})
    await stream.send(b'{"method":"initialized"}')
    thread = (await call("thread/start", {"cwd": cwd}))["result"]["thread"]["id"]  # type: ignore[index]
    start = time.perf_counter()
    deltas = 0
    await stream.send(
        msgspec.json.encode(
            {
                "id": 999,
                "method": "turn/start",
                "params": {
                    "threadId": thread,
                    "input": [{"type": "text", "text": f"@@ words {words}"}],
                },
            }
        )
    )
    while True:
        data = await stream.receive()
        if b'"item/agentMessage/delta"' in data:
            deltas += 1
        elif b'"turn/completed"' in data:
            break
    elapsed = time.perf_counter() - start
    assert deltas == words, f"direct: {deltas} deltas for {words} words"
    await process.stdin.aclose()
    with trio.move_on_after(5):
        await process.wait()
    if process.poll() is None:
        process.kill()
    return elapsed


#: The bridge process's own CPU time per delta, one entry per run (its Codex not counted).
CPU_PER_DELTA: list[float] = []
#: Deltas the bridge merged because the client fell behind, one entry per run.
MERGED: list[int] = []


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (from /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bridge_run(env: dict[str, str], cwd: str, words: int) -> float:
    """The same bare client, speaking ACP to ``codex-acp-bridge serve``."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bridge", "serve", "--log-level", "error"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin and process.stdout
    stream = LineStream(process.stdout, process.stdin)

    async def call(rid: int, method: str, params: object) -> dict[str, object]:
        await stream.send(
            msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        )
        while True:
            message = msgspec.json.decode(await stream.receive())
            if message.get("id") == rid:
                return message  # type: ignore[no-any-return]

    await call(1, "initialize", {"protocolVersion": 1})
    session = (await call(2, "session/new", {"cwd": cwd, "mcpServers": []}))["result"]["sessionId"]  # type: ignore[index]
    start = time.perf_counter()
    chunks = 0
    cpu_before = cpu_seconds(process.pid)
    await stream.send(
        msgspec.json.encode(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {
                    "sessionId": session,
                    "prompt": [{"type": "text", "text": f"@@ words {words}"}],
                },
            }
        )
    )
    while True:
        data = await stream.receive()
        if b'"agent_message_chunk"' in data:
            chunks += 1
        elif data.startswith(b'{"jsonrpc":"2.0","id":3,'):
            break
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(process.pid) - cpu_before
    CPU_PER_DELTA.append(cpu / words)
    assert b"end_turn" in data and 0 < chunks <= words, (data, chunks)
    # A client that stalled (this machine busy elsewhere) gets deltas merged: said, not fatal.
    MERGED.append(words - chunks)
    await process.stdin.aclose()
    with trio.move_on_after(5):
        await process.wait()
    if process.poll() is None:
        process.kill()
    return elapsed


@asynccontextmanager
async def model_process() -> AsyncIterator[str]:
    """The scripted model in a process of its own (its base URL): served from this one, its
    work would hold up the client's reading, and the client would not be keeping up."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bridge.scripted_model"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        line = await LineStream(process.stderr, None).receive()
        yield line.decode().removeprefix("listening on ").strip()
    finally:
        process.kill()
        await process.wait()


async def main(words: int, runs: int) -> None:
    codex_bin = find_codex()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        async with model_process() as base_url, trio.open_nursery() as nursery:
            home = Path(tmp) / "home"
            home.mkdir()
            write_codex_home(home, base_url)
            cwd = Path(tmp) / "work"
            cwd.mkdir()
            env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
            env.pop("OPENAI_API_KEY", None)
            direct: list[float] = []
            bridged: list[float] = []
            await direct_run(codex_bin, env, str(cwd), 100)  # warm caches
            for _ in range(runs):
                direct.append(await direct_run(codex_bin, env, str(cwd), words))
                bridged.append(await bridge_run(env, str(cwd), words))
            nursery.cancel_scope.cancel()
    ratios = [b / d for b, d in zip(bridged, direct, strict=True)]
    print(f"stream of {words:,} words, {runs} alternating runs")
    print(
        f"direct app-server client: median {statistics.median(direct):.3f} s  ({', '.join(f'{x:.3f}' for x in direct)})"
    )
    print(
        f"through the bridge:       median {statistics.median(bridged):.3f} s  ({', '.join(f'{x:.3f}' for x in bridged)})"
    )
    print(f"bridge/direct: median {statistics.median(ratios):.3f} (target <= 1.05)")
    print(
        f"bridge CPU per delta: median {statistics.median(CPU_PER_DELTA) * 1e6:.1f} us "
        "(the bridge process alone, user + system)"
    )
    if any(MERGED):
        print(
            f"note: in {sum(1 for m in MERGED if m)} of {runs} runs the client fell behind and "
            f"the bridge merged {sum(MERGED):,} deltas (it did not keep up: a busy machine?)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, args.words, args.runs)
