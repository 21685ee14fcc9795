"""Cost as the stored work grows: ``session/list`` over N stored threads, ``session/load`` of
one thread of T turns, the bridge beside a bare app-server client making the same Codex calls.

The store is Codex's own: a ``CODEX_HOME`` pointed at the scripted model, where one real
``codex app-server`` runs one thread of one turn, and then one thread of T turns (each a
real ``turn/start`` answered by the scripted model). The N listed threads are copies of the
one-turn thread's rollout file with new ids and times (in N/3 directories, so a ``cwd``
filter matches a third), indexed by Codex itself: one ``thread/list`` that scans the files
(no ``useStateDbOnly``) writes every one into its state DB, as it does for rollouts an older
Codex wrote. ``--store DIR`` keeps (and reuses) the stores.

Measured, medians of ``--runs`` alternating runs, each a fresh process:

- ``list first``: ``session/list`` (no ``cwd``), its first page;
- ``list all``: every page, following ``nextCursor``;
- ``list cwd``: every page with a ``cwd`` matching a third of the threads;
- ``load``: ``session/load`` of the T-turn thread, request to response, and to its first
  ``session/update``; peak RSS of the bridge and of Codex while it runs (sampled every
  10 ms from ``/proc``).

The bare client speaks to its own ``codex app-server`` over stdio and makes the calls the
bridge makes for the client: for a list, ``thread/list`` pages as the bridge asks them (the
bridge's one page read from the thread files, which repairs Codex's index once a connection
has listed, is not among them: the bridge's times include it, the bare client's do not);
for a load, ``thread/read``, ``thread/resume`` and then ``thread/items/list`` pages (or
``--bare-load turns``: ``thread/turns/list`` pages, the bridge's before it read items;
``--bare-load whole``: ``thread/read`` with ``includeTurns``, the bridge's request before
it paged). Both are warmed up first (a read of a thread that is not there), so neither
counts Codex's start. The load average is printed before and after: the machine may be
shared. CPU times are in clock ticks (10 ms).

    PYTHONPATH=. .venv/bin/python bench/stored_work.py [--threads 100,1000] [--turns 30,300,1000]
        [--runs 3] [--store DIR] [--bare-load paged|turns|whole] [--what list,load]
        [--bridge-source DIR] [--peer CMD] [--profile DIR] [--pass-through]

``--peer CMD`` measures another ACP agent for Codex beside them, on the same stores with the
same ACP requests (the TypeScript adapter: ``--peer /path/to/node_modules/.bin/codex-acp``,
run with ``CODEX_PATH`` naming this Codex). ``--profile DIR`` runs each bridge under
cProfile, its stats written there.

``--pass-through`` adds the bare client by way of ``bench/pass_through.py``, a process that
passes bytes both ways and does nothing else: what any adapter costs by being a process of its
own, the floor under the bridge's and the peer's times.

``--bridge-source DIR`` runs the bridge from another tree (``git archive REV | tar -x -C
DIR``), to compare versions on the same stores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from bridge.scripted_model import serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex

ROOT = Path(__file__).resolve().parent.parent
PAGE = 50  # the bridge's page of sessions, asked of Codex (see bridge.engine.features.sessions.lifecycle)
TURN_PAGE = 50  # the bridge's page of turns, where Codex has no items of a thread
ITEM_PAGE = 100  # the bridge's page of items (see bridge.engine.features.subagents._history_pages)
#: Seconds any one request may take before the run fails (no request here takes one).
REQUEST_TIMEOUT = 120


# -- /proc ---------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(p) for p in (task / "children").read_text().split()]
    return out


def app_server_pid(root: int) -> int | None:
    """The ``codex app-server`` process under ``root`` (itself, or a descendant)."""
    pending = [root]
    while pending:
        pid = pending.pop()
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"app-server" in argv and not argv[0].endswith(b"node"):
            return pid
        pending += children(pid)
    return None


class Peak:
    """Peak RSS of some processes, sampled while a block runs."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = {k: v for k, v in pids.items() if v is not None}
        self.peak = dict.fromkeys(self.pids, 0)

    async def sample(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], rss_bytes(pid))
            await trio.sleep(0.01)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- a bare app-server client ------------------------------------------------------------------


class LineRpc:
    """JSON-RPC over a subprocess's stdio, by hand: the client of every process measured
    (a bare ``codex app-server``, the bridge, the peer), so each is measured through the
    same few lines of client and none pays for a heavier one's bookkeeping."""

    def __init__(self, process: trio.Process, *, acp: bool = False) -> None:
        self.process = process
        #: ACP's messages carry ``"jsonrpc": "2.0"`` (an ACP SDK ignores any without it);
        #: Codex's leave it out.
        self.envelope: dict[str, Any] = {"jsonrpc": "2.0"} if acp else {}
        self.next_id = 0
        self.buffer = b""
        self.notifications: list[dict[str, Any]] = []
        #: ``perf_counter()`` when the first notification after :meth:`mark` arrived.
        self.first_notification: float | None = None

    def mark(self) -> None:
        self.notifications.clear()
        self.first_notification = None

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = self.next_id
        self.next_id += 1
        assert self.process.stdin is not None
        message = {**self.envelope, "id": rid, "method": method, "params": params}
        line = msgspec.json.encode(message) + b"\n"
        await self.process.stdin.send_all(line)
        with trio.fail_after(REQUEST_TIMEOUT):
            return await self._answer(rid, method)

    async def _answer(self, rid: int, method: str) -> Any:
        assert self.process.stdin is not None
        while True:
            message = await self._message()
            if message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            if "method" not in message:
                continue
            if "id" in message:  # the agent asks the client: nothing here answers it
                refusal = {
                    **self.envelope,
                    "id": message["id"],
                    "error": {"code": -32601, "message": "not offered by this client"},
                }
                await self.process.stdin.send_all(msgspec.json.encode(refusal) + b"\n")
                continue
            if self.first_notification is None:
                self.first_notification = time.perf_counter()
            self.notifications.append(message)

    async def _message(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.process.stdout.receive_some(1 << 20)
            if not chunk:
                raise RuntimeError("the process measured closed its stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        # msgspec, as the bridge decodes: the client's own parsing is not what is measured.
        return msgspec.json.decode(line)  # type: ignore[no-any-return]

    async def wait_for(self, method: str) -> dict[str, Any]:
        while True:
            message = await self._message()
            if message.get("method") == method:
                return message


async def open_bare(home: Path, *, through: bool = False) -> LineRpc:
    """A bare client of ``codex app-server``; ``through``: by way of ``pass_through.py``."""
    launch = codex_launch(find_codex(), {**os.environ, "CODEX_HOME": str(home)})
    argv = [launch.program, "app-server"]
    if through:
        argv = [sys.executable, str(ROOT / "bench" / "pass_through.py"), launch.program]
    process = await trio.lowlevel.open_process(
        argv,
        env=launch.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    bare = LineRpc(process)
    await bare.request(
        "initialize",
        {
            "clientInfo": {"name": "stored-work-bench", "version": "0"},
            "capabilities": {"experimentalApi": True},
        },
    )
    assert process.stdin is not None
    await process.stdin.send_all(b'{"method":"initialized"}\n')
    # As the bridge is warmed up before it is timed (see with_bridge).
    with contextlib.suppress(RuntimeError):
        await bare.request("thread/read", {"threadId": str(uuid.uuid4())})
    return bare


async def close_bare(bare: LineRpc) -> None:
    if bare.process.stdin is not None:
        await bare.process.stdin.aclose()
    with trio.move_on_after(5):
        await bare.process.wait()
    if bare.process.poll() is None:
        bare.process.kill()
        await bare.process.wait()


# -- building the stores -----------------------------------------------------------------------


async def build_home(home: Path, base_url: str) -> None:
    write_codex_home(home, base_url)


async def run_turns(bare: LineRpc, cwd: Path, turns: int) -> str:
    started = await bare.request("thread/start", {"cwd": str(cwd)})
    thread_id = started["thread"]["id"]
    for n in range(turns):
        await bare.request(
            "turn/start",
            {"threadId": thread_id, "input": [{"type": "text", "text": f"turn {n}: @@ words 12"}]},
        )
        await bare.wait_for("turn/completed")
    return thread_id


def rollout_of(home: Path, thread_id: str) -> Path:
    [path] = list((home / "sessions").rglob(f"*{thread_id}.jsonl"))
    return path


def clone_rollouts(
    home: Path, source: Path, old_id: str, count: int, cwds: list[Path], old_cwd: Path
) -> list[Path]:
    """``count`` copies of ``source`` with new ids, one a second older each, spread over ``cwds``."""
    text = source.read_text()
    base = time.time() - count - 10
    written = []
    for n in range(count):
        new_id = str(uuid.uuid4())
        cwd = cwds[n % len(cwds)]
        when = time.gmtime(base + n)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", when)
        day = home / "sessions" / time.strftime("%Y/%m/%d", when)
        day.mkdir(parents=True, exist_ok=True)
        body = text.replace(old_id, new_id).replace(str(old_cwd), str(cwd))
        iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", when)
        body = re.sub(r'"timestamp":\s*"[^"]*"', f'"timestamp":"{iso}"', body)
        path = day / f"rollout-{stamp}-{new_id}.jsonl"
        path.write_text(body)
        os.utime(path, (base + n, base + n))
        written.append(path)
    return written


async def build_store(store: Path, threads: int, turns: list[int]) -> dict[str, Any]:
    """A Codex home of ``threads`` listed threads plus one thread of each of ``turns`` turns."""
    meta_path = store / "store.json"
    if meta_path.exists():
        return json.loads(meta_path.read_text())
    home = store / "home"
    work = store / "work"
    cwds = [work / f"project-{k}" for k in range(3)]
    long_cwd = work / "long"
    for path in [*cwds, long_cwd]:
        path.mkdir(parents=True, exist_ok=True)
    async with trio.open_nursery() as nursery:
        model = await nursery.start(serve_scripted_model)
        await build_home(home, model.base_url)
        bare = await open_bare(home)
        try:
            one = await run_turns(bare, cwds[0], 1)
            long_ids = {}
            for t in turns:
                long_ids[str(t)] = await run_turns(bare, long_cwd, t)
        finally:
            await close_bare(bare)
        source = rollout_of(home, one)
        clone_rollouts(home, source, one, threads - 1, cwds, cwds[0])
        # Codex indexes the copies itself: a listing that scans the files repairs its state DB.
        bare = await open_bare(home)
        try:
            cursor = None
            while True:
                params: dict[str, Any] = {"limit": 200}
                if cursor:
                    params["cursor"] = cursor
                page = await bare.request("thread/list", params)
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        finally:
            await close_bare(bare)
        nursery.cancel_scope.cancel()
    meta = {
        "home": str(home),
        "threads": threads,
        "cwd": str(cwds[1]),
        "long": long_ids,
        "long_cwd": str(long_cwd),
    }
    meta_path.write_text(json.dumps(meta))
    return meta


# -- measurements ----------------------------------------------------------------------------


def list_params(cursor: str | None, cwd: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"sortKey": "updated_at", "limit": PAGE, "useStateDbOnly": True}
    if cursor:
        params["cursor"] = cursor
    if cwd:
        params["cwd"] = cwd
    return params


async def bare_list(
    home: Path, cwd: str | None, first_only: bool, through: bool = False
) -> dict[str, float]:
    bare = await open_bare(home, through=through)
    try:
        codex = app_server_pid(bare.process.pid) or bare.process.pid
        cpu0 = cpu_seconds(codex)
        t0 = time.perf_counter()
        cursor, rows = None, 0
        while True:
            page = await bare.request("thread/list", list_params(cursor, cwd))
            rows += len(page["data"])
            cursor = page.get("nextCursor")
            if not cursor or first_only:
                break
        elapsed = time.perf_counter() - t0
        return {"s": elapsed, "codex_cpu": cpu_seconds(codex) - cpu0, "rows": rows}
    finally:
        await close_bare(bare)


async def bare_load(
    home: Path, thread_id: str, cwd: str, mode: str, through: bool = False
) -> dict[str, float]:
    bare = await open_bare(home, through=through)
    try:
        codex = app_server_pid(bare.process.pid) or bare.process.pid
        peak = Peak({"codex": codex})
        async with trio.open_nursery() as nursery:
            await nursery.start(peak.sample)
            cpu0 = cpu_seconds(codex)
            t0 = time.perf_counter()
            first = None
            if mode == "whole":
                await bare.request("thread/read", {"threadId": thread_id, "includeTurns": True})
                first = time.perf_counter() - t0
                await bare.request(
                    "thread/resume", {"threadId": thread_id, "cwd": cwd, "excludeTurns": True}
                )
            else:
                await bare.request("thread/read", {"threadId": thread_id})
                await bare.request(
                    "thread/resume", {"threadId": thread_id, "cwd": cwd, "excludeTurns": True}
                )
                cursor = None
                while True:
                    params: dict[str, Any] = {"threadId": thread_id, "sortDirection": "asc"}
                    if mode == "turns":
                        params.update(limit=TURN_PAGE, itemsView="full")
                    else:
                        params["limit"] = ITEM_PAGE
                    if cursor:
                        params["cursor"] = cursor
                    method = "thread/turns/list" if mode == "turns" else "thread/items/list"
                    page = await bare.request(method, params)
                    if first is None:
                        first = time.perf_counter() - t0
                    cursor = page.get("nextCursor")
                    if not cursor:
                        break
            elapsed = time.perf_counter() - t0
            cpu = cpu_seconds(codex) - cpu0
            nursery.cancel_scope.cancel()
        return {
            "s": elapsed,
            "first": first or elapsed,
            "codex_cpu": cpu,
            "codex_mb": peak.peak["codex"] / 1e6,
        }
    finally:
        await close_bare(bare)


#: The bridge's source: this tree, or ``--bridge-source`` (another version, to compare).
SOURCE = [ROOT]
#: ``--profile DIR``: each bridge runs under cProfile, its stats written there.
PROFILE: list[Path] = []


def bridge_argv() -> list[str]:
    # -P: the bridge from PYTHONPATH (SOURCE), not from the working directory.
    if PROFILE:
        out = PROFILE[0] / f"bridge-{time.time_ns()}.prof"
        return [sys.executable, "-P", "-m", "cProfile", "-o", str(out), "-m", "bridge", "serve"]
    return [sys.executable, "-P", "-m", "bridge", "serve"]


#: ``--peer CMD``: another ACP agent for Codex measured beside the bridge (the TypeScript
#: adapter, say), run with ``CODEX_PATH`` naming this Codex.
PEER: list[str] = []


async def with_bridge(
    home: Path, body: Callable[[LineRpc, int], Awaitable[dict[str, float]]], *, peer: bool = False
) -> Any:
    env = {**os.environ, "CODEX_HOME": str(home), "PYTHONPATH": str(SOURCE[0])}
    env.pop("OPENAI_API_KEY", None)
    env[ENV_CODEX_BIN] = find_codex()  # another tree has no Codex of its own
    env["CODEX_PATH"] = find_codex()  # the peer's word for it
    runtime = Path(tempfile.mkdtemp(prefix="stored-work-rt-"))
    env["XDG_RUNTIME_DIR"] = str(runtime)
    argv = PEER if peer else bridge_argv()
    try:
        process = await trio.lowlevel.open_process(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        client = LineRpc(process, acp=True)
        try:
            await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            # Codex started and its handshake done, as for the bare client: a load of a
            # thread that is not there waits for both and lists nothing.
            with contextlib.suppress(RuntimeError):
                await client.request(
                    "session/load",
                    {"sessionId": str(uuid.uuid4()), "cwd": str(home), "mcpServers": []},
                )
            return await body(client, process.pid)
        finally:
            await close_bare(client)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


async def bridge_list(
    home: Path, cwd: str | None, first_only: bool, peer: bool = False
) -> dict[str, float]:
    async def body(client: LineRpc, pid: int) -> dict[str, float]:
        codex = app_server_pid(pid)
        cpu0 = cpu_seconds(pid), cpu_seconds(codex) if codex else 0.0
        t0 = time.perf_counter()
        cursor, rows = None, 0
        while True:
            params: dict[str, Any] = {}
            if cursor:
                params["cursor"] = cursor
            if cwd:
                params["cwd"] = cwd
            page = await client.request("session/list", params)
            rows += len(page["sessions"])
            cursor = page.get("nextCursor")
            if not cursor or first_only:
                break
        elapsed = time.perf_counter() - t0
        return {
            "s": elapsed,
            "bridge_cpu": cpu_seconds(pid) - cpu0[0],
            "codex_cpu": (cpu_seconds(codex) if codex else 0.0) - cpu0[1],
            "rows": rows,
        }

    return await with_bridge(home, body, peer=peer)


async def bridge_load(home: Path, thread_id: str, cwd: str, peer: bool = False) -> dict[str, float]:
    async def body(client: LineRpc, pid: int) -> dict[str, float]:
        codex = app_server_pid(pid)
        peak = Peak({"bridge": pid, "codex": codex})
        async with trio.open_nursery() as nursery:
            await nursery.start(peak.sample)
            cpu0 = cpu_seconds(pid), cpu_seconds(codex) if codex else 0.0
            client.mark()
            t0 = time.perf_counter()
            await client.request(
                "session/load", {"sessionId": thread_id, "cwd": cwd, "mcpServers": []}
            )
            elapsed = time.perf_counter() - t0
            first = client.first_notification
            updates = sum(1 for m in client.notifications if m.get("method") == "session/update")
            result = {
                "s": elapsed,
                "first": first - t0 if first is not None else elapsed,
                "bridge_cpu": cpu_seconds(pid) - cpu0[0],
                "codex_cpu": (cpu_seconds(codex) if codex else 0.0) - cpu0[1],
                "bridge_mb": peak.peak["bridge"] / 1e6,
                "codex_mb": peak.peak.get("codex", 0) / 1e6,
                "updates": updates,
            }
            nursery.cancel_scope.cancel()
        return result

    return await with_bridge(home, body, peer=peer)


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def show(label: str, values: dict[str, float]) -> None:
    parts = []
    for key, value in values.items():
        if key in ("rows", "updates"):
            parts.append(f"{key}={int(value)}")
        elif key.endswith("_mb"):
            parts.append(f"{key}={value:.0f}")
        else:
            parts.append(f"{key}={value:.4f}")
    print(f"  {label:<28} " + " ".join(parts), flush=True)


def report(
    title: str,
    bridge: list[dict[str, float]],
    peer: list[dict[str, float]],
    bare: list[dict[str, float]],
    bare_label: str,
    through: list[dict[str, float]],
) -> None:
    """The medians, then the bridge's time over the bare client's, the peer's and the pass-
    through's: the ratio of the medians, and the range of the ratios of runs taken side by
    side (the noise)."""
    print(f"{title}  (load average {load_average()})")
    show("bridge", median(bridge))
    if peer:
        show("peer", median(peer))
    show(bare_label, median(bare))
    if through:
        show("bare through a pass-through", median(through))
    for name, other in (("bare", bare), ("peer", peer), ("pass-through", through)):
        if not other:
            continue
        pairs = sorted(b["s"] / o["s"] for b, o in zip(bridge, other, strict=True))
        ratio = median(bridge)["s"] / median(other)["s"]
        print(f"  bridge/{name}: {ratio:.2f}  (run by run: {pairs[0]:.2f} to {pairs[-1]:.2f})")


async def main(args: argparse.Namespace) -> int:
    print(f"bridge from {SOURCE[0]}", flush=True)
    root = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="stored-work-"))
    turns = [int(t) for t in args.turns.split(",") if t]
    what = set(args.what.split(","))
    print(f"load average before: {load_average()}  (cpus: {os.cpu_count()})", flush=True)
    for n in [int(t) for t in args.threads.split(",") if t]:
        store = root / f"n{n}"
        t0 = time.perf_counter()
        meta = await build_store(store, n, turns)
        print(f"store of {n} threads ready ({time.perf_counter() - t0:.1f} s)", flush=True)
        home = Path(meta["home"])
        if "list" in what:
            for label, cwd, first in (
                ("list first", None, True),
                ("list all", None, False),
                ("list cwd (1/3)", meta["cwd"], False),
            ):
                bridge_runs, bare_runs, peer_runs, through_runs = [], [], [], []
                for _ in range(args.runs):
                    bridge_runs.append(await bridge_list(home, cwd, first))
                    bare_runs.append(await bare_list(home, cwd, first))
                    if PEER:
                        peer_runs.append(await bridge_list(home, cwd, first, peer=True))
                    if args.pass_through:
                        through_runs.append(await bare_list(home, cwd, first, through=True))
                report(
                    f"N={n} {label}",
                    bridge_runs,
                    peer_runs,
                    bare_runs,
                    "bare app-server client",
                    through_runs,
                )
        if "load" in what and n == int(args.threads.split(",")[0]):
            for t in turns:
                thread_id = meta["long"].get(str(t))
                if thread_id is None:
                    continue
                bridge_runs, bare_runs, peer_runs, through_runs = [], [], [], []
                for _ in range(args.runs):
                    bridge_runs.append(await bridge_load(home, thread_id, meta["long_cwd"]))
                    bare_runs.append(
                        await bare_load(home, thread_id, meta["long_cwd"], args.bare_load)
                    )
                    if PEER:
                        peer_runs.append(
                            await bridge_load(home, thread_id, meta["long_cwd"], peer=True)
                        )
                    if args.pass_through:
                        through_runs.append(
                            await bare_load(
                                home, thread_id, meta["long_cwd"], args.bare_load, through=True
                            )
                        )
                report(
                    f"T={t} load",
                    bridge_runs,
                    peer_runs,
                    bare_runs,
                    f"bare client ({args.bare_load})",
                    through_runs,
                )
    print(f"load average after: {load_average()}", flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="100,1000")
    parser.add_argument("--turns", default="30,300,1000")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--store", default=None)
    parser.add_argument("--bare-load", choices=("paged", "turns", "whole"), default="paged")
    parser.add_argument("--what", default="list,load")
    parser.add_argument("--bridge-source", default=None, help="run the bridge from this tree")
    parser.add_argument(
        "--peer", default=None, help="another ACP agent's command line, measured beside"
    )
    parser.add_argument("--profile", default=None, help="write each bridge's cProfile stats here")
    parser.add_argument(
        "--pass-through",
        action="store_true",
        help="also the bare client through bench/pass_through.py: any process's own cost",
    )
    arguments = parser.parse_args()
    if arguments.peer:
        PEER.extend(shlex.split(arguments.peer))
    if arguments.profile:
        PROFILE.append(Path(arguments.profile).absolute())
        PROFILE[0].mkdir(parents=True, exist_ok=True)
    if arguments.bridge_source:
        SOURCE[0] = Path(arguments.bridge_source).absolute()
    sys.exit(trio.run(main, arguments))
