"""Sessions on a machine against sessions here, through a real ``serve``: what the link
(Codex's exec-server relayed over ssh, ``bridge/shell/machine_link.py``) costs a command.

Each run starts ``python -m bridge serve --no-daemon --machine m=URL --ssh-command CMD``
(its own Codex, the scripted model in this process, one warm ``CODEX_HOME`` for all runs),
opens two sessions, one ``local`` and one on ``m`` (``session/set_config_option machine``),
and times, from ``session/prompt`` sent to its answer:

1. **round trip**: ``@@ call exec_command {"cmd": "true", "sandbox_permissions":
   "require_escalated"}`` (approved by the client, as an editor's user would), then
   ``@@ say done``, local and on the machine;
2. **1 MB output**: the same with ``head -c 1000000 /dev/zero | tr '\\0' a``;
3. **ready**: the run's first prompt on the machine (a round trip of 1) is where the link
   is made: the bridge checks the machine (``ssh HOST codex --version``) and Codex connects
   its exec-server. Measured twice: that prompt's time minus the median of the run's warm
   round trips on the machine, and from the prompt sent to the bridge's log line ``machine
   m: connected`` (its check done; Codex's exec-server connection follows).

Within a run the pairs alternate (local first in odd runs, the machine first in even ones),
so that what else the machine does falls on both alike. Each run prints its times; the end
a table: per measure the median and range, local and machine, the ratio of the medians and
the median and range of the per-run ratios (machine over local in the same run). Numbers,
never assertions.

By default the machine is a stand-in on this machine: ``--ssh-command`` is a script that
runs its last argument with ``sh -c`` in a folder here, with the pinned Codex on ``PATH``
(no ssh, no network: the relay and the exec-server alone). The closing numbers should come
from a real sshd on loopback, e.g. the tests' (``tests/support/sshd.py``)::

    .venv/bin/python bench/machines.py --url ssh://user@127.0.0.1:PORT/PATH \\
        --ssh-command 'ssh -F CONFIG'

    .venv/bin/python bench/machines.py [--runs N] [--url URL] [--ssh-command CMD]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from bridge.acp_client import AcpClient, open_agent
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex

#: Seconds any one request may take.
REQUEST_TIMEOUT = 120
MACHINE = "m"
TRUE = "true"
MEGABYTE = "head -c 1000000 /dev/zero | tr '\\0' a"
STAND_IN = """#!/bin/sh
# A stand-in ssh: [options...] -- HOST COMMAND, run here with sh -c, in {folder}.
for last; do :; done
cd {folder} || exit 255
PATH={bin}:/usr/bin:/bin exec sh -c "$last"
"""
#: The bridge's log line of a link made (``logging``'s asctime, then the message).
CONNECTED = re.compile(rf"^(\S+ \S+) INFO \S+: machine {MACHINE}: connected$", re.M)


def prompt_of(cmd: str) -> str:
    args = {"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "bench"}
    return f"@@ call exec_command {json.dumps(args)}\n@@ then\n@@ say done"


async def approve(method: str, params: Any) -> Any:
    if method == "session/request_permission":
        allow = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
    raise RuntimeError(f"unexpected request {method}")


@dataclass
class Run:
    """One run's seconds, by measure and side."""

    times: dict[str, dict[str, float]] = field(default_factory=dict)
    first: float = 0.0
    #: From the first prompt on the machine sent to the log's "connected" (None: no line).
    connected: float | None = None


async def timed_prompt(client: AcpClient, session: str, text: str) -> float:
    start = time.perf_counter()
    with trio.fail_after(REQUEST_TIMEOUT):
        answer = await client.prompt(session, text)
    took = time.perf_counter() - start
    if answer.get("stopReason") != "end_turn":
        raise RuntimeError(f"the prompt ended {answer.get('stopReason')!r}: {answer}")
    return took


def log_time(stamp: str) -> float:
    """``logging``'s asctime (``2026-12-02 12:03:05,123``) as Unix seconds."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


async def one_run(n: int, argv: list[str], env: dict[str, str], local: Path, log: Path) -> Run:
    run = Run()
    async with open_agent(argv, env=env, on_request=approve, stderr=subprocess.DEVNULL) as (
        client,
        _process,
    ):
        with trio.fail_after(REQUEST_TIMEOUT):
            await client.initialize()
            here = await client.new_session(str(local))
            there = await client.new_session(str(local))
            await client.request(
                "session/set_config_option",
                {"sessionId": there, "configId": "machine", "value": MACHINE},
            )
        sent = time.time()
        run.first = await timed_prompt(client, there, prompt_of(TRUE))
        found = CONNECTED.search(await trio.Path(log).read_text(errors="replace"))
        run.connected = log_time(found.group(1)) - sent if found else None
        sides = [("local", here), ("machine", there)]
        if n % 2 == 0:
            sides.reverse()
        for measure, cmd in (("round trip", TRUE), ("1 MB output", MEGABYTE)):
            run.times[measure] = {}
            for side, session in sides:
                run.times[measure][side] = await timed_prompt(client, session, prompt_of(cmd))
        if n == 0:
            # Where the machine's commands run (the stand-in's folder proves it).
            await timed_prompt(client, there, prompt_of("touch ran-on-the-machine"))
    return run


def stand_in(scratch: Path, codex_bin: str) -> tuple[str, str]:
    """The default machine: a folder here, reached by a script in ssh's place."""
    folder = scratch / "machine"
    bin_dir = scratch / "machine-bin"
    folder.mkdir()
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(codex_launch(codex_bin, os.environ).program)
    script = scratch / "ssh"
    script.write_text(
        STAND_IN.format(folder=shlex.quote(str(folder)), bin=shlex.quote(str(bin_dir)))
    )
    script.chmod(0o755)
    return f"ssh://stand-in{folder}", shlex.quote(str(script))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def spread(seconds: list[float]) -> str:
    return f"{min(seconds) * 1000:.0f}-{max(seconds) * 1000:.0f}"


def table(runs: list[Run]) -> list[str]:
    header = ["measure", "local", "min-max", "machine", "min-max", "ratio", "per run", "range"]
    rows = [header]
    for measure in ("round trip", "1 MB output"):
        local = [r.times[measure]["local"] for r in runs]
        there = [r.times[measure]["machine"] for r in runs]
        per_run = [t / h for t, h in zip(there, local, strict=True)]
        rows.append(
            [
                measure,
                ms(statistics.median(local)),
                spread(local),
                ms(statistics.median(there)),
                spread(there),
                f"{statistics.median(there) / statistics.median(local):.2f}",
                f"{statistics.median(per_run):.2f}",
                f"{min(per_run):.2f}-{max(per_run):.2f}",
            ]
        )
    first = [r.first for r in runs]
    extra = [r.first - r.times["round trip"]["machine"] for r in runs]
    rows.append(["first prompt on it", "", "", ms(statistics.median(first)), spread(first)])
    rows.append(["  ready: first - warm", "", "", ms(statistics.median(extra)), spread(extra)])
    seen = [r.connected for r in runs if r.connected is not None]
    if seen:
        rows.append(["  ready: log's connected", "", "", ms(statistics.median(seen)), spread(seen)])
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(header))]
    fmt: Callable[[list[str]], str] = lambda row: "  ".join(  # noqa: E731
        cell.ljust(w) if i == 0 else cell.rjust(w)
        for i, (cell, w) in enumerate(zip(row, widths, strict=False))
    ).rstrip()
    return [fmt(row) for row in rows]


async def main(runs: int, url: str | None, ssh_command: str | None) -> None:
    codex_bin = find_codex()
    with tempfile.TemporaryDirectory(prefix="bench-machines-") as tmp:
        scratch = Path(tmp)
        stand_in_folder = None
        if url is None:
            url, default_ssh = stand_in(scratch, codex_bin)
            stand_in_folder = scratch / "machine"
            ssh_command = ssh_command or default_ssh
            where = "a stand-in ssh on this machine (sh -c in a folder: no ssh, no network)"
        else:
            where = f"{url} over {ssh_command or 'ssh'}"
        local = scratch / "local"
        local.mkdir()
        home = scratch / "codex-home"
        async with trio.open_nursery() as nursery:
            model: ScriptedModel = await nursery.start(serve_scripted_model)
            write_codex_home(home, model.base_url)
            env = {
                k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")
            }
            env |= {
                "CODEX_HOME": str(home),
                ENV_CODEX_BIN: codex_bin,
                "CODEX_ACP_BRIDGE_MACHINES": str(scratch / "no-machines.toml"),
                "XDG_STATE_HOME": str(scratch / "state"),
            }
            print(f"{runs} runs; machine {MACHINE}: {where}; Codex {codex_bin}")
            print(
                f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
            done: list[Run] = []
            for n in range(runs + 1):
                log = scratch / f"bridge-{n}.log"
                argv = [sys.executable, "-m", "bridge", "serve", "--no-daemon"]
                argv += ["--machine", f"{MACHINE}={url}", "--log-level", "info"]
                argv += ["--log-file", str(log)]
                if ssh_command:
                    argv += ["--ssh-command", ssh_command]
                run = await one_run(n, argv, env, local, log)
                label = "warm-up (untimed)" if n == 0 else f"run {n}"
                parts = ", ".join(
                    f"{m} {ms(t['local'])} / {ms(t['machine'])}" for m, t in run.times.items()
                )
                connected = "" if run.connected is None else f", connected at {ms(run.connected)}"
                print(
                    f"  {label}: first on it {ms(run.first)}{connected}; local / machine: {parts}"
                )
                if n:
                    done.append(run)
                elif stand_in_folder is not None:
                    ran = (stand_in_folder / "ran-on-the-machine").exists()
                    print(f"  (a command on it ran in the stand-in's folder: {ran})")
            print(f"load average (1 min) after: {os.getloadavg()[0]:.1f}")
            print(f"medians over {runs} runs (ratio: machine / local; per run: each run's own):")
            for row in table(done):
                print("  " + row)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--url", help="the machine, ssh://[USER@]HOST[:PORT][/PATH] (default: a stand-in)"
    )
    parser.add_argument("--ssh-command", help="how to run ssh, as serve's --ssh-command")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    trio.run(main, args.runs, args.url, args.ssh_command)
