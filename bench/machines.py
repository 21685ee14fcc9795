"""Sessions on machines against sessions here, through a real ``serve``: what the link
(Codex's exec-server relayed over ssh, or run in a container: ``bridge/shell/machine_link.py``)
costs a command.

Each run starts ``python -m bridge serve --no-daemon`` with one ``--machine`` per row (its own
Codex, the scripted model in this process, one warm ``CODEX_HOME`` for all runs), opens one
session ``local`` and one on each machine (``session/set_config_option machine``), and
times, from ``session/prompt`` sent to its answer:

1. **round trip**: ``@@ call exec_command {"cmd": "true", "sandbox_permissions":
   "require_escalated"}`` (approved by the client, as an editor's user would), then
   ``@@ say done``, here and on each machine;
2. **1 MB output**: the same with ``head -c 1000000 /dev/zero | tr '\\0' a``;
3. **ready**: the run's first prompt on each machine (a round trip of 1), sent just after
   the session picked it: its time minus the median of the run's warm round trips there.
   Codex connects to every machine as soon as the bridge registers it (at the handshake,
   before any session), so a link is made, or being made, while the sessions open; the
   first prompt waits for what is left of it (for a link not yet up, the bridge's check:
   ``ssh HOST codex --version``, ``podman exec CONTAINER CODEX --version``). Hence also:
   from the bridge started to its log's ``machine NAME: connected``;
4. **copy**: for the container with no Codex in it, Codex's first connection is turned
   away while the bridge copies its own Codex there (``podman cp``, some 400 MB), and the
   link is up at Codex's next connection: from the log's ``copying this bridge's`` to its
   ``copied into``, and when it began, from the bridge started.

The machines, one row each:

- ``ssh``: by default a stand-in on this machine, ``--ssh-command`` a script that runs its
  last argument with ``sh -c`` in a folder here, with the pinned Codex on ``PATH`` (no ssh,
  no network: the relay and the exec-server alone). Real numbers come from a real sshd on
  loopback, e.g. the tests' (``tests/support/sshd.py``)::

      .venv/bin/python bench/machines.py --url ssh://user@127.0.0.1:PORT/PATH \\
          --ssh-command 'ssh -F CONFIG'

- ``podman``: a podman container made as the tests make theirs
  (``tests/support/containers.py``: the test image, the private ``CONTAINERS_CONF``, the
  pinned Codex's vendor folder mounted at ``/opt/codex``), one for all runs, reached as
  ``podman://CONTAINER/srv/work?codex=/opt/codex/bin/codex``;
- ``podman-brought``: a container with no Codex in it, made afresh for each run, reached as
  ``podman://CONTAINER/srv/work``: the bridge brings its own Codex when the run's bridge
  starts, so every run pays the copy once, and its round trips are those after it.

With no podman, or no test image (``scripts/setup-containers`` builds it), or no pinned
Codex vendor folder, the two container rows are skipped, and the bench says why;
``--no-containers`` leaves them out.

Within a run the sides take turns (each run starts one further along: local, ssh, podman,
podman-brought, then ssh, podman, ...), so that what else the machine does falls on all
alike. Each run prints its times; the end a table: per measure and side the median and
range, the ratio of the medians against local, and the median and range of the per-run
ratios (the machine over local in the same run). Numbers, never assertions.

    .venv/bin/python bench/machines.py [--runs N] [--url URL] [--ssh-command CMD]
        [--no-containers]
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
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridge.acp_client import AcpClient, open_agent  # noqa: E402
from bridge.scripted_model import (  # noqa: E402
    ScriptedModel,
    serve_scripted_model,
    write_codex_home,
)
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex  # noqa: E402
from tests.support.containers import (  # noqa: E402
    CODEX_IN,
    Container,
    containers_conf,
    podman_or_skip,
    running_container,
    vendor_folder,
)

#: Seconds any one request may take (a first prompt on a container may copy 400 MB).
REQUEST_TIMEOUT = 120
LOCAL = "local"
SSH = "ssh"
PODMAN = "podman"
BROUGHT = "podman-brought"
MEASURES = ("round trip", "1 MB output")
TRUE = "true"
MEGABYTE = "head -c 1000000 /dev/zero | tr '\\0' a"
#: The machines' folder inside a container (made there: nothing of this machine's).
THERE = "/srv/work"
#: What each run's warm-up leaves on each machine, to show where its commands ran.
MARK = "ran-on-the-machine"
STAND_IN = """#!/bin/sh
# A stand-in ssh: [options...] -- HOST COMMAND, run here with sh -c, in {folder}.
for last; do :; done
cd {folder} || exit 255
PATH={bin}:/usr/bin:/bin exec sh -c "$last"
"""


def logged(name: str, what: str) -> re.Pattern[str]:
    """The bridge's log line ``machine NAME: WHAT`` (``logging``'s asctime first)."""
    return re.compile(rf"^(\S+ \S+) INFO \S+: machine {re.escape(name)}: {what}$", re.M)


def prompt_of(cmd: str) -> str:
    args = {"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "bench"}
    return f"@@ call exec_command {json.dumps(args)}\n@@ then\n@@ say done"


async def approve(method: str, params: Any) -> Any:
    if method == "session/request_permission":
        allow = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
    raise RuntimeError(f"unexpected request {method}")


@dataclass
class Machine:
    """One row: a machine the bridge is given, and how to see that a command ran there."""

    name: str
    url: str
    #: Where it is, for the heading.
    about: str
    #: Whether ``MARK`` is there after the warm-up (None: this bench cannot look there).
    marked: Callable[[], Awaitable[bool]] | None


@dataclass
class Run:
    """One run's seconds, by measure and side, and by machine for its first prompt."""

    times: dict[str, dict[str, float]] = field(default_factory=dict)
    first: dict[str, float] = field(default_factory=dict)
    #: From the bridge started to the log's "connected" (absent: no such line).
    connected: dict[str, float] = field(default_factory=dict)
    #: From the bridge started to the log's "copying" (absent: no copy).
    copy_began: dict[str, float] = field(default_factory=dict)
    #: The log's "copying" to its "copied" (absent: no copy).
    copy: dict[str, float] = field(default_factory=dict)


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


def turn(sides: list[str], n: int) -> list[str]:
    """``sides`` starting ``n`` places along: each run gives each side each place in turn."""
    k = n % len(sides)
    return sides[k:] + sides[:k]


async def one_run(
    n: int, argv: list[str], env: dict[str, str], local: Path, log: Path, machines: list[str]
) -> Run:
    run = Run()
    started = time.time()
    async with open_agent(argv, env=env, on_request=approve, stderr=subprocess.DEVNULL) as (
        client,
        _process,
    ):
        with trio.fail_after(REQUEST_TIMEOUT):
            await client.initialize()
            sessions = {LOCAL: await client.new_session(str(local))}
            for name in machines:
                sessions[name] = await client.new_session(str(local))
        for name in turn(machines, n):
            with trio.fail_after(REQUEST_TIMEOUT):
                await client.request(
                    "session/set_config_option",
                    {"sessionId": sessions[name], "configId": "machine", "value": name},
                )
            run.first[name] = await timed_prompt(client, sessions[name], prompt_of(TRUE))
        text = await trio.Path(log).read_text(errors="replace")
        for name in machines:
            found = logged(name, "connected").search(text)
            if found:
                run.connected[name] = log_time(found.group(1)) - started
            copying = logged(name, "no Codex .*: copying this bridge's .*").search(text)
            copied = logged(name, "Codex .* copied into .*").search(text)
            if copying and copied:
                run.copy_began[name] = log_time(copying.group(1)) - started
                run.copy[name] = log_time(copied.group(1)) - log_time(copying.group(1))
        sides = turn([LOCAL, *machines], n)
        for measure, cmd in zip(MEASURES, (TRUE, MEGABYTE), strict=True):
            run.times[measure] = {}
            for side in sides:
                run.times[measure][side] = await timed_prompt(
                    client, sessions[side], prompt_of(cmd)
                )
        if n == 0:
            for name in machines:
                await timed_prompt(client, sessions[name], prompt_of(f"touch {MARK}"))
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


async def containers_missing(env: dict[str, str]) -> str | None:
    """Why the container rows cannot run here, in the tests' own words; None: they can."""
    try:
        await podman_or_skip(env)
        vendor_folder()
    except pytest.skip.Exception as skipped:
        return str(skipped.msg)
    except pytest.fail.Exception as failed:
        return str(failed.msg)
    return None


@asynccontextmanager
async def container(env: dict[str, str], *, codex: bool) -> AsyncIterator[Container]:
    """A container as the tests make theirs, with the machines' folder made in it."""
    name = f"cab-bench-{uuid.uuid4().hex[:10]}"
    async with running_container(env, name=name, codex=codex) as made:
        await made.exec("mkdir", "-p", THERE)
        yield made


def in_container(made: Container, codex: bool) -> Machine:
    name, query = (PODMAN, f"?codex={CODEX_IN}") if codex else (BROUGHT, "")
    about = "its Codex mounted, named with ?codex=" if codex else "no Codex in it: brought"
    return Machine(
        name,
        f"podman://{made.name}{THERE}{query}",
        f"podman container {made.name} ({about})",
        lambda: made.exists_inside(f"{THERE}/{MARK}"),
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def spread(seconds: list[float]) -> str:
    return f"{min(seconds) * 1000:.0f}..{max(seconds) * 1000:.0f}"


def table(runs: list[Run], machines: list[str]) -> list[str]:
    header = ["", "median", "min..max", "ratio", "per run", "range"]
    rows = [header]
    for measure in MEASURES:
        rows.append([measure])
        local = [r.times[measure][LOCAL] for r in runs]
        rows.append([f"  {LOCAL}", ms(statistics.median(local)), spread(local)])
        for name in machines:
            there = [r.times[measure][name] for r in runs]
            per_run = [t / h for t, h in zip(there, local, strict=True)]
            rows.append(
                [
                    f"  {name}",
                    ms(statistics.median(there)),
                    spread(there),
                    f"{statistics.median(there) / statistics.median(local):.2f}",
                    f"{statistics.median(per_run):.2f}",
                    f"{min(per_run):.2f}..{max(per_run):.2f}",
                ]
            )

    def section(title: str, of: Callable[[Run, str], float | None]) -> None:
        found = {
            name: [v for v in (of(r, name) for r in runs) if v is not None] for name in machines
        }
        if any(found.values()):
            rows.append([title])
        for name, seconds in found.items():
            if seconds:
                rows.append([f"  {name}", ms(statistics.median(seconds)), spread(seconds)])

    section("first prompt on it", lambda r, name: r.first[name])
    section(
        "ready: first prompt - warm round trip",
        lambda r, name: r.first[name] - r.times["round trip"][name],
    )
    section("connected (the log's), after the bridge started", lambda r, n: r.connected.get(n))
    section("copying Codex in (the log's)", lambda r, name: r.copy.get(name))
    section("  began, after the bridge started", lambda r, name: r.copy_began.get(name))
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(header))]
    fmt: Callable[[list[str]], str] = lambda row: "  ".join(  # noqa: E731
        cell.ljust(w) if i == 0 else cell.rjust(w)
        for i, (cell, w) in enumerate(zip(row, widths, strict=False))
    ).rstrip()
    return [fmt(row) for row in rows]


def said(run: Run, label: str, machines: list[str]) -> str:
    """One run's line."""
    firsts = []
    for name in machines:
        also = []
        if name in run.copy:
            also.append(f"copy {ms(run.copy[name])} from {ms(run.copy_began[name])}")
        if name in run.connected:
            also.append(f"connected {ms(run.connected[name])} after the start")
        firsts.append(f"{name} {ms(run.first[name])}" + (f" ({', '.join(also)})" if also else ""))
    parts = [
        f"{m}: " + " / ".join(f"{side} {t[side] * 1000:.0f}" for side in [LOCAL, *machines]) + " ms"
        for m, t in run.times.items()
    ]
    return f"  {label}: first prompt: {', '.join(firsts)}; " + "; ".join(parts)


async def tail(log: Path, lines: int = 30) -> str:
    try:
        text = await trio.Path(log).read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


async def main(runs: int, url: str | None, ssh_command: str | None, containers: bool) -> None:
    codex_bin = find_codex()
    with tempfile.TemporaryDirectory(prefix="bench-machines-") as tmp:
        scratch = Path(tmp)
        if url is None:
            url, default_ssh = stand_in(scratch, codex_bin)
            ssh_command = ssh_command or default_ssh
            folder = scratch / "machine"
            ssh = Machine(
                SSH,
                url,
                "a stand-in ssh on this machine (sh -c in a folder: no ssh, no network)",
                lambda: trio.Path(folder / MARK).exists(),
            )
        else:
            ssh = Machine(SSH, url, f"{url} over {ssh_command or 'ssh'}", None)
        local = scratch / "local"
        local.mkdir()
        home = scratch / "codex-home"
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
        env |= {
            "CODEX_HOME": str(home),
            ENV_CODEX_BIN: codex_bin,
            "CODEX_ACP_BRIDGE_MACHINES": str(scratch / "no-machines.toml"),
            "XDG_STATE_HOME": str(scratch / "state"),
            # The tests' settings for podman here; the bridge's podman exec reads it too.
            "CONTAINERS_CONF": str(containers_conf(scratch / "podman")),
        }
        print(f"{runs} runs; Codex {codex_bin}")
        print(f"  machine {SSH}: {ssh.about}")
        async with AsyncExitStack() as stack:
            fixed = [ssh]
            why = await containers_missing(env) if containers else "--no-containers given"
            if why is None:
                try:
                    fixed.append(
                        in_container(
                            await stack.enter_async_context(container(env, codex=True)), True
                        )
                    )
                except AssertionError as failed:  # podman's own words
                    why = f"a container could not be made: {failed}"
            if why is None:
                print(f"  machine {PODMAN}: {fixed[-1].about}")
                print(
                    f"  machine {BROUGHT}: a podman container with no Codex in it, made anew "
                    "for each run: the bridge copies its own there as it starts"
                )
            else:
                print(f"  rows {PODMAN} and {BROUGHT} skipped: {why}")
            nursery = await stack.enter_async_context(trio.open_nursery())
            model: ScriptedModel = await nursery.start(serve_scripted_model)
            write_codex_home(home, model.base_url)
            print(
                f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
            done: list[Run] = []
            names = [m.name for m in fixed] + ([BROUGHT] if why is None else [])
            for n in range(runs + 1):
                log = scratch / f"bridge-{n}.log"
                async with AsyncExitStack() as per_run:
                    machines = list(fixed)
                    if why is None:
                        bare = await per_run.enter_async_context(container(env, codex=False))
                        machines.append(in_container(bare, False))
                    argv = [sys.executable, "-m", "bridge", "serve", "--no-daemon"]
                    for machine in machines:
                        argv += ["--machine", f"{machine.name}={machine.url}"]
                    argv += ["--log-level", "info", "--log-file", str(log)]
                    if ssh_command:
                        argv += ["--ssh-command", ssh_command]
                    try:
                        run = await one_run(n, argv, env, local, log, names)
                    except BaseException:
                        print(f"run {n} failed; the bridge's log ends:\n{await tail(log)}")
                        raise
                    label = "warm-up (untimed)" if n == 0 else f"run {n}"
                    print(said(run, label, names))
                    if n == 0:
                        for machine in machines:
                            if machine.marked is not None:
                                ran = await machine.marked()
                                print(f"  (a command on {machine.name} ran there: {ran})")
                if n:
                    done.append(run)
            print(f"load average (1 min) after: {os.getloadavg()[0]:.1f}")
            print(
                f"medians over {runs} runs (ratio: the machine's / local's; per run: each "
                "run's own):"
            )
            for row in table(done, names):
                print("  " + row)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--url", help="the ssh machine, ssh://[USER@]HOST[:PORT][/PATH] (default: a stand-in)"
    )
    parser.add_argument("--ssh-command", help="how to run ssh, as serve's --ssh-command")
    parser.add_argument(
        "--containers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the podman rows (default: on, skipped saying why where podman cannot run them)",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    trio.run(main, args.runs, args.url, args.ssh_command, args.containers)
