"""The daemon's live page under load: 200 threads, 20 of them streaming.

The real ``codex-acp-bridge daemon`` (its own process) joins a stand-in for Codex's daemon:
this script serves Codex's app-server protocol on the Unix socket Codex's daemon uses
(``$CODEX_HOME/app-server-control/app-server-control.sock``), with T threads (200), S of
them (20) streaming ``item/agentMessage/delta`` at R deltas a second each. Each delta's text
is a line carrying the wall-clock time it was sent, so the page's "last line" tells how old
it is when it arrives. Phases, each D seconds:

1. **closed**: no page open; the daemon's CPU (user+sys from ``/proc``) while the threads stream;
2. **open**: the page open (a WebSocket client with the page's origin and secret, and, when
   Chromium is installed, the page itself in headless Chromium); the daemon's CPU, the page's
   (Chromium's ``TaskDuration``: the renderer's main thread), and the update delay: from the moment a delta is written to the daemon until the page receives the
   row carrying it (median, p95, max over every row received);
3. **idle**: the page open, nothing streaming: the daemon's CPU and the page's (Chromium's
   ``TaskDuration``), which should both be nearly nothing;
4. **an hour**: an hour of a busy user's work played as fast as it goes (time simulated, not
   waited): every simulated minute a new thread starts, streams 60 lines and ends, 2 approvals
   are asked and answered elsewhere, 20 threads change state; then the page's JS heap and DOM
   nodes (after a garbage collection) against before, and the daemon's RSS;
5. **closed again**: the page gone, the threads stream again: the daemon's CPU is back to (1),
   as it left every thread it had subscribed to for the page.

    .venv/bin/python bench/status_page.py [--threads 200] [--streaming 20] [--rate 20]
        [--seconds 10] [--minutes 60]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from websockets.trio.client import connect
from websockets.trio.server import ServerConnection, serve

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.daemon.runtime import page_address, read_info  # noqa: E402
from tests.support.browser import headless_chromium  # noqa: E402


class FakeCodex:
    """Codex's app-server protocol, as much of it as the daemon's watcher uses."""

    def __init__(self, threads: int) -> None:
        self.threads = [f"thread-{n:04d}" for n in range(threads)]
        self.connections: set[ServerConnection] = set()
        self.subscribed: dict[ServerConnection, set[str]] = {}
        self.request_ids = itertools.count(1000)

    def stored(self, thread_id: str, status: str = "idle") -> dict[str, Any]:
        n = int(thread_id.rsplit("-", 1)[1])
        return {
            "id": thread_id,
            "cwd": f"/home/me/src/project-{n % 7}",
            "preview": f"Task {n}: make the thing better",
            "updatedAt": int(time.time()) - n * 60,
            "status": {"type": status}
            if status != "active"
            else {"type": "active", "activeFlags": []},
            "model": "gpt-5.5",
        }

    async def handle(self, connection: ServerConnection) -> None:
        self.connections.add(connection)
        self.subscribed[connection] = set()
        try:
            async for text in connection:
                message = json.loads(text)
                if "method" not in message or "id" not in message:
                    continue
                result = self.answer(connection, message["method"], message.get("params") or {})
                await connection.send(json.dumps({"id": message["id"], "result": result}))
        except Exception:
            pass
        finally:
            self.connections.discard(connection)
            self.subscribed.pop(connection, None)

    def answer(self, connection: ServerConnection, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            return {"userAgent": "codex_cli_rs/0.171.0"}
        if method == "thread/list":
            return {"data": [self.stored(t, "idle") for t in self.threads], "nextCursor": None}
        if method == "thread/loaded/list":
            return {"data": list(self.threads), "nextCursor": None}
        if method == "thread/read":
            return {"thread": self.stored(params["threadId"])}
        if method == "thread/resume":
            self.subscribed[connection].add(params["threadId"])
            return {"thread": {**self.stored(params["threadId"]), "turns": []}, "model": "gpt-5.5"}
        if method == "thread/unsubscribe":
            self.subscribed[connection].discard(params["threadId"])
            return {"status": "unsubscribed"}
        return {}

    async def notify(
        self, method: str, params: dict[str, Any], thread_id: str | None = None
    ) -> None:
        data = json.dumps({"method": method, "params": params})
        for connection in list(self.connections):
            # Items and deltas only to connections subscribed to the thread, as Codex does.
            if thread_id is None or thread_id in self.subscribed.get(connection, ()):
                with contextlib.suppress(Exception):  # it went away
                    await connection.send(data)

    async def status(self, thread_id: str, kind: str, flags: list[str] | None = None) -> None:
        status: dict[str, Any] = {"type": kind}
        if kind == "active":
            status["activeFlags"] = flags or []
        await self.notify("thread/status/changed", {"threadId": thread_id, "status": status})

    async def stream(self, thread_ids: list[str], rate: float, seconds: float) -> int:
        """Every thread of ``thread_ids`` streams ``rate`` deltas a second for ``seconds``."""
        sent = 0
        for thread_id in thread_ids:
            await self.status(thread_id, "active")
        deadline = trio.current_time() + seconds
        tick = 1 / rate
        while trio.current_time() < deadline:
            for thread_id in thread_ids:
                delta = {"threadId": thread_id, "turnId": "turn", "itemId": f"msg-{thread_id}"}
                delta["delta"] = f"\nsent at {time.time():.6f}"
                await self.notify("item/agentMessage/delta", delta, thread_id)
                sent += 1
            await trio.sleep(tick)
        for thread_id in thread_ids:
            await self.status(thread_id, "idle")
        return sent


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    return (
        int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    )


async def measured(pid: int, work: Any) -> tuple[float, Any]:
    """The daemon's CPU share (0..1 of one core) while ``work`` runs, and what it returned."""
    cpu, wall = cpu_seconds(pid), time.monotonic()
    result = await work()
    return (cpu_seconds(pid) - cpu) / (time.monotonic() - wall), result


async def page_client(address: str, delays: list[float], stop: trio.Event) -> None:
    """A page over the WebSocket (origin and first message as a browser sends them): each
    row's last line says when its delta was sent."""
    base, token = address.split("#token=")
    host = base.split("//")[1].rstrip("/")
    origin = f"http://{host}"
    async with connect(f"ws://{host}/ws", origin=origin, max_size=None) as ws:  # type: ignore[arg-type]
        await ws.send(json.dumps({"type": "token", "token": token}))
        while not stop.is_set():
            with trio.move_on_after(0.5):
                message = json.loads(await ws.recv())
                now = time.time()
                for row in message.get("threads", []):
                    line = row.get("lastLine", "")
                    if line.startswith("sent at "):
                        delays.append(now - float(line[8:]))


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="cab-page-"))
    home, runtime = work / "home", work / "rt"
    sock = home / "app-server-control" / "app-server-control.sock"
    sock.parent.mkdir(parents=True)
    codex = FakeCodex(args.threads)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.bind(str(sock))
    raw.listen(64)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(raw))
    env = {**os.environ, "CODEX_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.setdefault("CODEX_ACP_BRIDGE_CODEX_BIN", str(ROOT / "tools/node/node_modules/.bin/codex"))
    streaming = codex.threads[: args.streaming]
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve(
                codex.handle, listeners=[listener], max_size=None, task_status=task_status
            )
        )
        daemon = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(runtime)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(work / "daemon.log").open("wb"),
        )
        try:
            with trio.fail_after(30):
                while (  # noqa: ASYNC110 (polls the daemon's files)
                    (info := read_info(runtime)) is None
                    or not info.pageUrl
                    or not codex.connections
                ):
                    await trio.sleep(0.05)
            await trio.sleep(1.0)  # the watcher lists and reads every thread
            address = page_address(runtime, info)
            assert address is not None
            print(
                f"{args.threads} threads, {args.streaming} streaming {args.rate:g} deltas/s each; {args.seconds:g} s a phase"
            )

            share, sent = await measured(
                daemon.pid, lambda: codex.stream(streaming, args.rate, args.seconds)
            )
            print(f"page closed: daemon CPU {share:.1%} of a core ({sent} deltas)")

            delays: list[float] = []
            stop = trio.Event()
            chromium = shutil.which("chromium")
            async with trio.open_nursery() as pages:
                pages.start_soon(page_client, address, delays, stop)
                if chromium:
                    browser = headless_chromium(chromium, work / "profile", work / "chromium.log")
                    page = await browser.__aenter__()
                    await page.goto(address)
                    await page.wait_for("document.querySelector('#link.on')")
                    await page.send("Performance.enable")
                    # When each row's new last line is in the page's DOM, against when it was sent.
                    await page.evaluate(WATCH_DOM)
                await trio.sleep(1.0)  # subscribed
                task = await _task_seconds(page) if chromium else 0.0
                share, sent = await measured(
                    daemon.pid, lambda: codex.stream(streaming, args.rate, args.seconds)
                )
                busy_page = (
                    ((await _task_seconds(page)) - task) / args.seconds if chromium else None
                )
                shown = f", the page {busy_page:.1%}" if busy_page is not None else ""
                print(f"page open: daemon CPU {share:.1%} of a core{shown} ({sent} deltas)")
                _delays("delta written → row received over the WebSocket", delays)
                if chromium:
                    in_dom = await page.evaluate("window.benchDelays.splice(0)")
                    _delays("delta written → row in the page's DOM", in_dom)

                await trio.sleep(2.0)  # the last updates drawn
                task = await _task_seconds(page) if chromium else 0.0
                share, _ = await measured(daemon.pid, lambda: trio.sleep(args.seconds))  # noqa: ASYNC105
                idle_page = (
                    ((await _task_seconds(page)) - task) / args.seconds if chromium else None
                )
                shown = f", the page {idle_page:.2%}" if idle_page is not None else ""
                print(f"idle, page open: daemon CPU {share:.2%} of a core{shown}")

                if chromium:
                    before = await _memory(page)
                    started = time.monotonic()
                    await _an_hour(codex, args.minutes)
                    await trio.sleep(1.0)
                    after = await _memory(page)
                    print(
                        f"{args.minutes} simulated minutes in {time.monotonic() - started:.1f} s: page JS heap "
                        f"{before[0]:.1f} → {after[0]:.1f} MB, DOM nodes {before[1]} → {after[1]}; "
                        f"daemon RSS {rss_mb(daemon.pid):.0f} MB"
                    )
                    await browser.__aexit__(None, None, None)
                else:
                    print("no chromium: the page's own memory and CPU are not measured")
                stop.set()
            await trio.sleep(1.0)  # the watcher leaves the threads
            share, sent = await measured(
                daemon.pid, lambda: codex.stream(streaming, args.rate, args.seconds)
            )
            print(f"page closed again: daemon CPU {share:.1%} of a core ({sent} deltas)")
        finally:
            daemon.terminate()
            await daemon.wait()
            nursery.cancel_scope.cancel()
    shutil.rmtree(work, ignore_errors=True)


WATCH_DOM = """
window.benchDelays = [];
new MutationObserver((changes) => {
  const now = Date.now() / 1000;
  for (const change of changes) {
    const text = change.target.textContent || "";
    if (text.startsWith("sent at ")) window.benchDelays.push(now - parseFloat(text.slice(8)));
  }
}).observe(document.getElementById("threads"), { subtree: true, childList: true, characterData: true });
true
"""


def _delays(what: str, delays: list[float]) -> None:
    if not delays:
        print(f"update delay ({what}): none measured")
        return
    ms = sorted(d * 1000 for d in delays)
    p95 = ms[int(len(ms) * 0.95)]
    print(
        f"update delay ({what}): median {statistics.median(ms):.1f} ms, "
        f"p95 {p95:.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} rows"
    )


async def _an_hour(codex: FakeCodex, minutes: int) -> None:
    """A busy hour, played as fast as it goes."""
    ids = itertools.count()
    for minute in range(minutes):
        new = f"thread-{9000 + minute:04d}"
        codex.threads.append(new)
        await codex.notify("thread/started", {"thread": codex.stored(new)})
        await codex.status(new, "active")
        for _ in range(60):
            delta = {
                "threadId": new,
                "turnId": "t",
                "itemId": f"m-{new}",
                "delta": f"line {next(ids)}\n",
            }
            await codex.notify("item/agentMessage/delta", delta, new)
        for n in range(2):
            asked = codex.threads[(minute * 2 + n) % len(codex.threads)]
            await codex.status(asked, "active", ["waitingOnApproval"])
            request = next(codex.request_ids)
            params = {
                "threadId": asked,
                "turnId": "t",
                "itemId": f"i{request}",
                "command": "make test",
                "cwd": "/w",
                "reason": "r",
            }
            for connection in list(codex.connections):
                await connection.send(
                    json.dumps(
                        {
                            "id": request,
                            "method": "item/commandExecution/requestApproval",
                            "params": params,
                        }
                    )
                )
            await codex.notify("serverRequest/resolved", {"threadId": asked, "requestId": request})
            await codex.status(asked, "idle")
        for n in range(20):
            await codex.status(codex.threads[(minute * 20 + n) % len(codex.threads)], "idle")
        await codex.status(new, "idle")
        await trio.sleep(0.05)


async def _task_seconds(page: Any) -> float:
    metrics = await page.send("Performance.getMetrics")
    return float(next(m["value"] for m in metrics["metrics"] if m["name"] == "TaskDuration"))


async def _memory(page: Any) -> tuple[float, int]:
    await page.send("HeapProfiler.collectGarbage")
    heap = await page.send("Runtime.getHeapUsage")
    nodes = await page.evaluate("document.getElementsByTagName('*').length")
    return heap["usedSize"] / 2**20, int(nodes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--streaming", type=int, default=20)
    parser.add_argument(
        "--rate", type=float, default=20.0, help="deltas a second per streaming thread"
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--minutes", type=int, default=60)
    trio.run(main, parser.parse_args())
