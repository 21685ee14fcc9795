"""A long life of the daemon, accelerated: does anything grow, stall or go unanswered?

A real ``codex-acp-bridge daemon`` on a real Codex (the scripted model on 127.0.0.1) is
driven for ``--minutes`` by ``--editors`` editors at once, each an ACP client of a ``serve``
attached to the daemon. Each editor opens sessions and works in them, at random (``--seed``):
streamed answers (the text checked whole), commands with an approval, sub-agent trees,
prompts cancelled mid-answer, sessions closed and loaded again; it leaves, sometimes in
the middle of a turn, and a new one takes its place. Codex is killed every
``--kill-every`` seconds (the daemon starts it again). The daemon's page is open in three
WebSockets, one of which reads nothing for a minute at a time. A fifth of the sessions work
on a machine, ``box``: a folder here reached by a stand-in for ssh (the daemon runs the
link, its exec-server started through the stand-in); every ``--drop-every`` seconds the
machine drops (its exec-server killed, the stand-in refusing as ssh does for a host that
is down) for ``--down-for`` seconds, and comes back.

Every ``--sample`` seconds it records: the resident memory and open descriptors of the
daemon, of its Codex and of each ``serve``; the trio tasks of the daemon and of each
``serve`` and what each engine holds (thread records, open requests), written by them
with ``$CODEX_ACP_BRIDGE_CENSUS`` (:mod:`bridge.shell.census`); and Codex's own loaded
threads (``thread/loaded/list``). At the end (after every editor has left and a quiet
``--settle`` seconds): a table of the samples, the growth per 1,000 prompts after the
first fifth of the run (warm-up), and the checks: every request of the editors answered
exactly once, every streamed answer whole, the census back to its baseline.

    .venv/bin/python bench/soak.py [--minutes 10] [--seed 1] [--editors 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from websockets.exceptions import WebSocketException
from websockets.trio.client import connect
from websockets.typing import Origin

from bridge.acp_client import AcpClient, open_agent
from bridge.daemon.picture import ENV_MAX_THREADS
from bridge.daemon.runtime import read_info, running_daemon
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.scripted_model.directives import words_text
from bridge.shell.census import ENV_CENSUS, ENV_CENSUS_HEAP, ENV_CENSUS_TASKS
from bridge.shell.codex_process import codex_launch
from bridge.shell.codex_transport import ENV_CODEX_BIN, find_codex

SUBAGENTS = {"_meta": {"subagents": True}}
WORDS = 120
MACHINE = "box"
#: ssh's own words for a host that is down, and its status.
STAND_IN = """#!/bin/sh
# A stand-in ssh: [options...] -- HOST COMMAND, run here with sh -c, in {folder}.
if [ -e {down} ]; then
  echo "ssh: connect to host {host} port 22: Connection refused" >&2
  exit 255
fi
for last; do :; done
cd {folder} || exit 255
echo $$ >> {pids}
PATH={bin}:/usr/bin:/bin exec sh -c "$last"
"""


def run(cmd: str) -> str:
    """A command Codex runs with approval (outside the sandbox), then ``done``."""
    args = {"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "soak"}
    return f"@@ call exec_command {json.dumps(args)}\n@@ then\n@@ say done"


def spawn_tree() -> str:
    """A parent that spawns a child, waits for it, and answers."""
    spawn = json.dumps({"message": "@@ say child done", "agent_type": "worker"})
    wait = json.dumps({"targets": ["{{agent_id}}"], "timeout_ms": 30_000})
    return (
        f"@@ call multi_agent_v1/spawn_agent {spawn}\n@@ then\n"
        f"@@ call multi_agent_v1/wait_agent {wait}\n@@ then\n@@ say parent done"
    )


# -- what is measured ------------------------------------------------------------------------


def rss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


@dataclass
class Sample:
    at: float
    prompts: int
    daemon_rss: int
    codex_rss: int
    serve_rss: list[int]
    daemon_fds: int
    codex_fds: int
    daemon_tasks: int
    serve_tasks: list[int]
    records: list[int]
    open_requests: int
    loaded: int
    #: The long-lived serve: its memory, tasks and records.
    long_rss: int = 0
    long_tasks: int = -1
    long_records: int = -1
    #: The machine's state as the daemon publishes it.
    machine: str = "-"
    #: The daemon's picture of threads, and the page's rows.
    picture: int = -1
    #: With --heap: where the daemon's heap grew since its first minute.
    daemon_heap: list[Any] = field(default_factory=list)
    #: The daemon's tasks by name, and the long-lived serve's whole census.
    daemon_names: dict[str, int] = field(default_factory=dict)
    long_census: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tally:
    prompts: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    answered: Counter[str] = field(default_factory=Counter)
    editors: int = 0
    kills: int = 0
    drops: int = 0
    #: Sessions that work on the machine.
    on_machine: set[str] = field(default_factory=set)
    serve_pids: set[int] = field(default_factory=set)
    #: The serve of the editor that stays the whole run.
    long_lived: int = 0

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)


# -- the editors -------------------------------------------------------------------------------


async def allow(method: str, params: Any) -> Any:
    if method == "session/request_permission":
        option = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    raise RpcError(-32601, f"the soak's editor does not answer {method}")


def check_answers(client: AcpClient, tally: Tally) -> None:
    """Every request the editor sent was answered, and once (the client matches answers to
    requests; a second answer to one id, or an answer to none, is a problem)."""
    answers = Counter(
        m.get("id")
        for m in client.received
        if "id" in m and "method" not in m and ("result" in m or "error" in m)
    )
    for rid, count in answers.items():
        if count != 1:
            tally.problem(f"request {rid} answered {count} times")
    for rid in client.sent_requests:
        if rid not in answers:
            tally.answered["unanswered at leave"] += 1
    tally.answered["answered"] += sum(1 for c in answers.values() if c == 1)


async def editor(
    number: int,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    log: Path,
    rng: random.Random,
    deadline: float,
    tally: Tally,
) -> None:
    """Editors one after another in slot ``number`` until ``deadline``."""
    sessions: list[str] = []  # kept across editors: a later one loads them again
    # Slot 0 is one editor for the whole run: what a long-lived serve holds.
    stays = number == 0
    while trio.current_time() < deadline:
        tally.editors += 1
        with log.open("ab") as out:
            async with open_agent(argv, env=env, stderr=out.fileno(), on_request=allow) as (
                client,
                process,
            ):
                tally.serve_pids.add(process.pid)
                try:
                    await client.initialize(SUBAGENTS)
                    if stays:
                        tally.long_lived = process.pid
                    while True:
                        try:
                            await _work(client, sessions, cwd, rng, deadline, tally, stays=stays)
                        except RpcError as exc:
                            # A session refused while Codex restarts: the editor that stays
                            # tries again, as a person would; the others leave.
                            if not stays:
                                raise
                            tally.outcomes[f"refused, tried again: {exc.message[:50]}"] += 1
                            await trio.sleep(1)
                        if not stays or trio.current_time() >= deadline:
                            break
                except (RpcError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    tally.outcomes[f"editor ended: {str(exc)[:60]}"] += 1
                finally:
                    tally.serve_pids.discard(process.pid)
                    check_answers(client, tally)
        await trio.sleep(rng.uniform(0.0, 0.5))


async def open_session(client: AcpClient, cwd: str, rng: random.Random, tally: Tally) -> str:
    """A new session; a fifth of them on the machine."""
    sid = await client.new_session(cwd)
    if rng.random() < 0.2:
        try:
            await client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": "machine", "value": MACHINE},
            )
            tally.on_machine.add(sid)
        except RpcError as exc:
            tally.outcomes[f"machine refused: {exc.message[:50]}"] += 1
    return sid


async def _work(
    client: AcpClient,
    sessions: list[str],
    cwd: str,
    rng: random.Random,
    deadline: float,
    tally: Tally,
    *,
    stays: bool = False,
) -> None:
    if sessions and rng.random() < 0.5:
        sid = rng.choice(sessions)
        try:
            await client.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
            tally.outcomes["loaded"] += 1
        except RpcError as exc:
            tally.outcomes[f"load refused: {exc.message[:50]}"] += 1
            sid = await open_session(client, cwd, rng, tally)
    else:
        sid = await open_session(client, cwd, rng, tally)
    if sid not in sessions:
        sessions.append(sid)
        del sessions[:-20]
    for _ in range(rng.randint(3, 12)):
        if trio.current_time() >= deadline:
            return
        action = rng.choices(
            ["stream", "command", "subagents", "cancel", "close", "leave"],
            weights=[50, 15, 10, 10, 8, 0 if stays else 7],
        )[0]
        if action == "leave":  # mid-turn: the editor goes, its turn goes on in Codex
            with trio.move_on_after(0.3):
                await client.prompt(sid, f"@@ words {WORDS * 10} delay_ms=5")
            tally.outcomes["left mid-turn"] += 1
            return
        if action == "close":
            with contextlib.suppress(RpcError):
                await client.request("session/close", {"sessionId": sid})
            tally.outcomes["closed"] += 1
            sid = await open_session(client, cwd, rng, tally)
            sessions.append(sid)
            continue
        tally.prompts += 1
        where = f"@{MACHINE}" if sid in tally.on_machine else ""
        before = len(client.text_of(sid))
        try:
            if action == "cancel":
                ended = {}

                async def prompt_long(session: str) -> None:
                    nonlocal ended
                    try:
                        ended = await client.prompt(session, f"@@ words {WORDS * 20} delay_ms=5")
                    except RpcError as exc:
                        ended = {"stopReason": f"failed: {exc.message[:50]}"}

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt_long, sid)
                    await trio.sleep(0.3)
                    await client.notify("session/cancel", {"sessionId": sid})
                tally.outcomes[f"cancel{where} → {ended.get('stopReason')}"] += 1
                continue
            text = {"stream": f"@@ words {WORDS}", "command": run("echo soak")}.get(
                action, spawn_tree()
            )
            ended = await client.prompt(sid, text)
            reason = ended.get("stopReason")
            tally.outcomes[f"{action}{where} → {reason}"] += 1
            if action == "stream" and reason == "end_turn":
                # What came since the prompt ends with the whole answer (before it, perhaps,
                # the rest of a turn an earlier editor left running, which this one waited for).
                said = client.text_of(sid)[before:]
                if not said.endswith(words_text(WORDS)):
                    tally.problem(f"{sid}: streamed answer not whole ({len(said)} chars)")
        except RpcError as exc:
            # A Codex killed mid-turn: the prompt ends with the bridge's error, the session
            # is resumed when Codex is back.
            tally.outcomes[f"{action}{where} failed: {exc.message[:50]}"] += 1
    if stays:
        # Done with it, as an editor closes a tab: what it held should go with it.
        with contextlib.suppress(RpcError):
            await client.request("session/close", {"sessionId": sid})


# -- around the editors --------------------------------------------------------------------------


async def codex_call(runtime: Path, method: str, params: Any) -> Any:
    """One request to the daemon's Codex on a connection of its own."""
    info = read_info(runtime)
    if info is None or not info.url.startswith("ws://"):
        return None
    token = (runtime / "token").read_text().strip()
    with trio.move_on_after(5):
        async with connect(
            info.url, additional_headers=[("Authorization", f"Bearer {token}")]
        ) as codex:
            hello = {"clientInfo": {"name": "soak", "version": "1"}}
            await codex.send(json.dumps({"id": 1, "method": "initialize", "params": hello}))
            await codex.recv()
            await codex.send(json.dumps({"method": "initialized"}))
            await codex.send(json.dumps({"id": 2, "method": method, "params": params}))
            while True:
                answer = json.loads(await codex.recv())
                if answer.get("id") == 2:
                    return answer.get("result")
    return None


async def loaded_threads(runtime: Path) -> int:
    with contextlib.suppress(OSError, WebSocketException, ValueError, trio.TooSlowError):
        result = await codex_call(runtime, "thread/loaded/list", {})
        if isinstance(result, dict):
            return len(result.get("data") or [])
    return -1


async def kill_codex(runtime: Path, every: float, deadline: float, tally: Tally) -> None:
    while trio.current_time() + every < deadline:
        await trio.sleep(every)
        info = running_daemon(runtime)
        if info is not None and info.codexPid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(info.codexPid, signal.SIGKILL)
                tally.kills += 1


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


async def drop_machine(
    machine: Path, every: float, down_for: float, deadline: float, tally: Tally
) -> None:
    """The machine goes away (its links killed, ssh refused) and comes back, again and again."""
    down, pids = machine / "down", machine / "pids"
    while trio.current_time() + every + down_for < deadline:
        await trio.sleep(every)
        down.touch()
        with contextlib.suppress(OSError):
            for line in pids.read_text().split():
                for pid in descendants(int(line)):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            pids.unlink()
        tally.drops += 1
        await trio.sleep(down_for)
        down.unlink()


def stand_in_machine(tmp: Path, codex_bin: str) -> tuple[Path, str, str]:
    """The machine: a folder here, a stand-in ssh that reaches it (and refuses while down)."""
    machine, folder, bin_dir = tmp / "machine", tmp / "machine" / "work", tmp / "machine" / "bin"
    folder.mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(codex_launch(codex_bin, os.environ).program)
    script = machine / "ssh"
    script.write_text(
        STAND_IN.format(
            folder=shlex.quote(str(folder)),
            bin=shlex.quote(str(bin_dir)),
            down=shlex.quote(str(machine / "down")),
            pids=shlex.quote(str(machine / "pids")),
            host=MACHINE,
        )
    )
    script.chmod(0o755)
    return machine, f"{MACHINE}=ssh://{MACHINE}{folder}", shlex.quote(str(script))


async def page_sockets(runtime: Path, deadline: float) -> None:
    """Three open pages; the third reads nothing for a minute at a time."""
    info = read_info(runtime)
    if info is None or not info.pageUrl:
        return
    token = (runtime / "page-token").read_text().strip()
    host = info.pageUrl.split("//", 1)[1].rstrip("/")
    secret = json.dumps({"type": "token", "token": token})

    async def page(reads: bool) -> None:
        while trio.current_time() < deadline:
            with contextlib.suppress(OSError, WebSocketException):
                async with connect(f"ws://{host}/ws", origin=Origin(f"http://{host}")) as ws:
                    await ws.send(secret)
                    while trio.current_time() < deadline:
                        if reads:
                            with trio.move_on_after(1):
                                await ws.recv()
                        else:
                            await trio.sleep(60)
                            with trio.move_on_after(5):
                                while True:
                                    await ws.recv()
            await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        for reads in (True, True, False):
            nursery.start_soon(page, reads)


def census(folder: Path, pid: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads((folder / f"{pid}.json").read_text()))
    return {}


async def sample(
    runtime: Path, census_dir: Path, daemon_pid: int, tally: Tally, started: float
) -> Sample:
    info = read_info(runtime)
    codex_pid = (info.codexPid or 0) if info is not None else 0
    serves = sorted(tally.serve_pids)
    counts = [census(census_dir, pid) for pid in serves]
    return Sample(
        at=time.monotonic() - started,
        prompts=tally.prompts,
        daemon_rss=rss(daemon_pid),
        codex_rss=rss(codex_pid),
        serve_rss=[rss(pid) for pid in serves],
        daemon_fds=fds(daemon_pid),
        codex_fds=fds(codex_pid),
        daemon_tasks=census(census_dir, daemon_pid).get("tasks", -1),
        serve_tasks=[c.get("tasks", -1) for c in counts],
        records=[c.get("records", -1) for c in counts],
        open_requests=sum(
            c.get("openClientRequests", 0) + c.get("openCodexRequests", 0) for c in counts
        ),
        loaded=await loaded_threads(runtime),
        long_rss=rss(tally.long_lived) if tally.long_lived else 0,
        long_tasks=census(census_dir, tally.long_lived).get("tasks", -1),
        long_records=census(census_dir, tally.long_lived).get("records", -1),
        machine=next((m.state for m in info.machines if m.name == MACHINE), "-")
        if info is not None
        else "-",
        daemon_names=census(census_dir, daemon_pid).get("taskNames", {}),
        picture=census(census_dir, daemon_pid).get("pictureThreads", -1),
        daemon_heap=census(census_dir, daemon_pid).get("heapGrowth", []),
        long_census=census(census_dir, tally.long_lived) if tally.long_lived else {},
    )


# -- the report ----------------------------------------------------------------------------------


def mb(value: int) -> str:
    return f"{value / 1e6:.1f}"


def median(values: list[int]) -> str:
    known = [v for v in values if v >= 0]  # -1: a serve that has not written its census yet
    return f"{statistics.median(known):.0f}" if known else "-"


def slope(samples: list[Sample], value: Any) -> float:
    """Least-squares growth of ``value(sample)`` per 1,000 prompts."""
    xs = [s.prompts for s in samples]
    ys = [value(s) for s in samples]
    if len(xs) < 2 or max(xs) == min(xs):
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return float(1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var)


def report(samples: list[Sample], idle: Sample, baseline: Sample, tally: Tally) -> int:
    print(
        f"{'min':>6} {'prompts':>8} {'daemon MB':>9} {'codex MB':>8} {'serve MB':>8} "
        f"{'d fds':>5} {'c fds':>5} {'d tasks':>7} {'s tasks':>7} {'records':>7} "
        f"{'open req':>8} {'loaded':>6} {'long MB':>7} {'l tasks':>7} {'l recs':>6} {'box':>9} {'picture':>7}"
    )
    for s in [*samples, idle]:
        print(
            f"{s.at / 60:6.1f} {s.prompts:8d} {mb(s.daemon_rss):>9} {mb(s.codex_rss):>8} "
            f"{(mb(int(statistics.median(s.serve_rss))) if s.serve_rss else '-'):>8} "
            f"{s.daemon_fds:5d} {s.codex_fds:5d} {s.daemon_tasks:7d} {median(s.serve_tasks):>7} "
            f"{median(s.records):>7} {s.open_requests:8d} {s.loaded:6d} "
            f"{mb(s.long_rss):>7} {s.long_tasks:7d} {s.long_records:6d} {s.machine:>9} {s.picture:7d}"
        )
    warm = samples[len(samples) // 5 :]
    print()
    print(f"after warm-up ({len(warm)} samples), growth per 1,000 prompts:")
    print(f"  daemon RSS   {slope(warm, lambda s: s.daemon_rss) / 1e6:+.2f} MB")
    print(f"  daemon fds   {slope(warm, lambda s: s.daemon_fds):+.2f}")
    print(f"  daemon tasks {slope(warm, lambda s: s.daemon_tasks):+.2f}")
    # Its own samples only: none once it has left (or before it wrote its census).
    long = [s for s in warm if s.long_rss > 0 and s.long_records >= 0]
    print(f"  long-lived serve RSS {slope(long, lambda s: s.long_rss) / 1e6:+.2f} MB")
    print(f"  long-lived serve records {slope(long, lambda s: s.long_records):+.2f}")
    rss_values = [s.daemon_rss for s in warm]
    if len(rss_values) > 2:
        print(
            f"  noise: daemon RSS over the warm samples {mb(min(rss_values))}-"
            f"{mb(max(rss_values))} MB (stdev {statistics.stdev(rss_values) / 1e6:.2f} MB)"
        )
    print()
    print(
        f"{tally.prompts:,} prompts, {tally.editors} editors, Codex killed {tally.kills} times, "
        f"the machine dropped {tally.drops} times"
    )
    for outcome, count in sorted(tally.outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {count:7,}  {outcome}")
    print(
        f"requests: {tally.answered['answered']:,} answered once, "
        f"{tally.answered['unanswered at leave']:,} still open when their editor left"
    )
    print(
        f"idle after the run: daemon {idle.daemon_fds} fds / {idle.daemon_tasks} tasks "
        f"(baseline {baseline.daemon_fds} / {baseline.daemon_tasks}), Codex {idle.loaded} "
        f"threads loaded"
    )
    grew = {
        name: (baseline.daemon_names.get(name, 0), count)
        for name, count in idle.daemon_names.items()
        if count > baseline.daemon_names.get(name, 0)
    }
    for name, (before, after) in sorted(grew.items(), key=lambda kv: kv[1][0] - kv[1][1]):
        print(f"  daemon task grew: {before} → {after}  {name}")
    for site, size, blocks in idle.daemon_heap:
        print(f"  daemon heap grew: {size / 1e3:+9.1f} kB {blocks:+7d} blocks  {site}")
    if idle.long_census:
        held = {k: v for k, v in idle.long_census.items() if k not in ("taskNames", "heapGrowth")}
        print(f"long-lived serve at the end: {json.dumps(held)}")
        for site, size, blocks in idle.long_census.get("heapGrowth", []):
            print(f"  its heap grew: {size / 1e3:+9.1f} kB {blocks:+7d} blocks  {site}")
    problems = list(tally.problems)
    if idle.daemon_tasks > baseline.daemon_tasks + 2:
        problems.append(f"daemon tasks {baseline.daemon_tasks} → {idle.daemon_tasks} when idle")
    if idle.daemon_fds > baseline.daemon_fds + 2:
        problems.append(f"daemon fds {baseline.daemon_fds} → {idle.daemon_fds} when idle")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("verdict:", "flat, nothing lost" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


# -- the run --------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    codex_bin = find_codex()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as name:
        tmp = Path(name)
        home, cwd, runtime, census_dir = (tmp / n for n in ("home", "work", "runtime", "census"))
        cwd.mkdir()
        census_dir.mkdir()
        env = {
            **os.environ,
            "CODEX_HOME": str(home),
            ENV_CODEX_BIN: codex_bin,
            ENV_CENSUS: str(census_dir),
            ENV_CENSUS_TASKS: "1",  # the report names the tasks that grew
            # The daemon's picture keeps this many threads (default 2,000): reached early
            # in the run, so that what follows shows the steady state.
            ENV_MAX_THREADS: str(args.daemon_threads),
            "XDG_STATE_HOME": str(tmp / "state"),
            "CODEX_ACP_BRIDGE_MACHINES": str(tmp / "no-machines.toml"),
        }
        env.pop("OPENAI_API_KEY", None)
        machine, machine_url, ssh_command = stand_in_machine(tmp, codex_bin)
        async with trio.open_nursery() as nursery:
            model: ScriptedModel = await nursery.start(serve_scripted_model)
            write_codex_home(home, model.base_url)
            with (tmp / "daemon.log").open("ab") as out:
                daemon_env = {**env, ENV_CENSUS_HEAP: "1"} if args.heap else env
                daemon = await trio.lowlevel.open_process(
                    [
                        *[sys.executable, "-m", "bridge", "daemon", "--runtime-dir", str(runtime)],
                        *["--machine", machine_url, "--ssh-command", ssh_command],
                    ],
                    env=daemon_env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                )
            try:
                with trio.fail_after(30):
                    while (info := running_daemon(runtime)) is None or info.state != "running":  # noqa: ASYNC110
                        await trio.sleep(0.1)
                status = await _drive(
                    args, rng, env, str(cwd), runtime, census_dir, daemon, tmp, machine
                )
            finally:
                daemon.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await daemon.wait()
                if daemon.poll() is None:
                    daemon.kill()
            nursery.cancel_scope.cancel()
    return status


async def _drive(
    args: argparse.Namespace,
    rng: random.Random,
    env: dict[str, str],
    cwd: str,
    runtime: Path,
    census_dir: Path,
    daemon: trio.Process,
    tmp: Path,
    machine: Path,
) -> int:
    tally = Tally()
    started = time.monotonic()
    await trio.sleep(2)
    baseline = await sample(runtime, census_dir, daemon.pid, tally, started)
    deadline = trio.current_time() + args.minutes * 60
    argv = [sys.executable, "-m", "bridge", "serve", "--runtime-dir", str(runtime)]
    argv += ["--log-level", "warning"]
    samples: list[Sample] = []

    async def sampler() -> None:
        while True:
            await trio.sleep(args.sample)
            samples.append(await sample(runtime, census_dir, daemon.pid, tally, started))
            last = samples[-1]
            print(
                f"  {last.at / 60:5.1f} min: {last.prompts:,} prompts, daemon "
                f"{mb(last.daemon_rss)} MB, {last.daemon_fds} fds, {last.daemon_tasks} tasks",
                file=sys.stderr,
                flush=True,
            )

    async with trio.open_nursery() as outer:
        outer.start_soon(sampler)
        outer.start_soon(page_sockets, runtime, deadline)
        outer.start_soon(kill_codex, runtime, args.kill_every, deadline, tally)
        outer.start_soon(drop_machine, machine, args.drop_every, args.down_for, deadline, tally)
        async with trio.open_nursery() as editors:
            for number in range(args.editors):
                seed = rng.randrange(1 << 30)
                editors.start_soon(
                    editor,
                    number,
                    argv,
                    # With --heap the serve that stays the whole run traces its heap too.
                    {**env, ENV_CENSUS_HEAP: "1"} if args.heap and number == 0 else env,
                    cwd,
                    tmp / f"serve-{number}.log",
                    random.Random(seed),
                    deadline,
                    tally,
                )
        outer.cancel_scope.cancel()
    await trio.sleep(args.settle)
    idle = await sample(runtime, census_dir, daemon.pid, tally, started)
    return report(samples, idle, baseline, tally)


if __name__ == "__main__":
    # A connection to a Codex being killed fails; websockets would log each one.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--editors", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=180.0, help="seconds between kills")
    parser.add_argument(
        "--drop-every", type=float, default=150.0, help="seconds between machine drops"
    )
    parser.add_argument("--down-for", type=float, default=20.0, help="seconds a drop lasts")
    parser.add_argument(
        "--heap",
        action="store_true",
        help="trace the heap of the daemon and of the serve that stays (slow): where it grew",
    )
    parser.add_argument(
        "--daemon-threads", type=int, default=300, help="threads the daemon's picture keeps"
    )
    parser.add_argument("--sample", type=float, default=20.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=15.0, help="quiet seconds at the end")
    sys.exit(trio.run(main, parser.parse_args()))
