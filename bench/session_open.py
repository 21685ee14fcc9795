"""Startup as a one-command client sees it: process start to ``initialize`` answered, and to
the first ``session/new`` answered (which lists every model, so it waits for Codex's
``model/list``, asked at the handshake), for the bridge and, side by side, for other ACP
agents for Codex (``--peer``).

Each start runs one agent with a ``CODEX_HOME`` pointed at the scripted model (``--home``: a
fresh one for each start, the default, where Codex sets up its state as at a first start; or
``warm``, one for all of an agent's starts, set up by its warm-up start, as a user's
``~/.codex``) and the same workspace for all, sends ``initialize``, then ``session/new`` once
it is answered (as a client must), and times both answers from the process's start. The
bridge is ``codex-acp-bridge serve --no-daemon``, which starts its own ``codex app-server``.

``--bytecode`` says how the bridge's own modules load: ``cached`` (from ``.pyc`` files,
as a pip or uvx install has them: ``PYTHONDONTWRITEBYTECODE`` is unset for the bridge,
and its warm-up start writes them), ``compile`` (``PYTHONDONTWRITEBYTECODE=1`` and a fresh
copy of the package without ``__pycache__``, as ``uvx`` installs it: its first start, the
warm-up, compiles it into the bridge's own bytecode cache, ``bridge/launch.py``, under an
``XDG_CACHE_HOME`` of the run's own, which the timed starts read), or ``both`` (the
default): the agents ``bridge-cached`` and ``bridge-compile``. Installed packages (trio,
click, ...) load from their ``.pyc`` files either way. The warm-up line gives that first
start's times too.

The agent ``app-server`` is the floor: no ACP agent, but a bare client of the ``codex
app-server`` the bridge runs, timed to its answer to ``initialize`` and (after ``model/list``,
which the bridge's first session waits for) to its answer to ``thread/start``, in the
``session/new`` column: what any adapter that runs Codex's app-server waits for at the least.

``--peer NAME=COMMAND`` (repeatable; COMMAND split as a shell would, by ``shlex``) adds
another ACP agent, driven by the same client with the same requests. Every agent gets the
same environment, less any API key (all talk to the scripted model only); a peer also gets
``CODEX_PATH`` naming the Codex binary the bridge runs, with the environment npm's launcher
would give it (``@agentclientprotocol/codex-acp`` runs that Codex; an agent with Codex built
in, as ``@zed-industries/codex-acp``, runs its own). Each agent's warm-up line says what it
is (its ``agentInfo``) and which ``codex app-server`` it ran, if any.

Every agent first starts once untimed (its warm-up); then the runs alternate: run 1 of each
agent in turn (the bridge in each bytecode mode, then the peers in the order given), then
run 2 of each, and so on, so that what else the machine does falls on all alike. Each run
prints a line per agent; the end the load average before and after (the ratios move with
it) and a table: per agent the median and range of both times and, against the
``--baseline`` agent (default: the first peer, if any), the ratio of the medians and the
median and range of the per-run ratios (each run's time over the baseline's in the same
run: on a shared, noisy machine, the steadier figure).

Each request may take ``REQUEST_TIMEOUT`` (60) seconds. An agent that fails to start or to
answer, in its warm-up or any run, gets a line saying why, with the last lines of its
stderr, and is left out of the later runs and of the table. An agent's stderr goes to a
file of each start's own, not to the terminal. Once answered, an agent is asked to exit
(its stdin closed) and killed if it has not within ``EXIT_WAIT`` (3) seconds; the next
start waits for it to be gone.

``--breakdown`` also times the parts, each on its own (medians): for each bytecode mode,
Python's start (``python -c pass``) and the imports of the ``serve`` path; then Codex's
``app-server`` answering ``initialize`` (the binary the bridge runs, and npm's Node
launcher when that is what was found).

    .venv/bin/python bench/session_open.py [--runs R] [--bytecode cached|compile|both]
        [--home fresh|warm] [--peer NAME=COMMAND ...] [--baseline NAME] [--breakdown]
        [--source DIR]

For instance, with both peers installed by npm in ``DIR``: ``--peer
zed=DIR/node_modules/.bin/codex-acp-linux-x64`` (``@zed-industries/codex-acp``'s native
binary, not its Node launcher) ``--peer ts='node
DIR/node_modules/@agentclientprotocol/codex-acp/dist/index.js'``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec
import trio

import bridge
from bridge.acp_client import open_agent
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, close_and_wait, codex_launch, find_codex

#: Everything ``serve`` imports on its way (the command, the engine, then trio and the shell).
SERVE_IMPORTS = (
    "import bridge.launch; bridge.launch.use_bytecode_cache(); import bridge.cli, bridge.serve, "
    "bridge.engine, bridge.shell.early, trio, bridge.shell.run_bridge, bridge.shell.stdio"
)
#: Seconds any one request may take before its agent is counted as failed.
REQUEST_TIMEOUT = 60
#: Seconds an agent has to exit once its stdin is closed (ACP's goodbye), before it is killed.
EXIT_WAIT = 3
#: Lines of a failed agent's stderr shown.
STDERR_TAIL = 12
#: Left out of every agent's environment: they all talk to the scripted model only.
API_KEYS = ("OPENAI_API_KEY", "CODEX_API_KEY")
#: The peers' name for the Codex binary to run.
ENV_PEER_CODEX = "CODEX_PATH"
ANSI_ESCAPE = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


class Mode:
    """How the bridge's modules load: the child's environment and working directory."""

    def __init__(self, name: str, scratch: Path, source: Path | None = None) -> None:
        self.name = name
        self.env = dict(os.environ)
        self.python_argv = [sys.executable]
        if name == "cached":
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            # A copy without __pycache__, where Python writes none: the bridge caches its
            # bytecode in a folder of its own (bridge/launch.py), here the run's.
            package = source / "bridge" if source else Path(bridge.__file__).parent
            source = scratch / "source"
            shutil.copytree(
                package, source / "bridge", ignore=shutil.ignore_patterns("__pycache__")
            )
            self.env["PYTHONDONTWRITEBYTECODE"] = "1"
            self.env["XDG_CACHE_HOME"] = str(scratch / "cache")
        if source is not None:
            # Found first: -P leaves the working directory off sys.path, PYTHONPATH leads.
            self.env["PYTHONPATH"] = str(source)
            self.python_argv.append("-P")

    def python(self, code: str) -> float:
        """Seconds to run ``python -c code`` in this mode (its interpreter's teardown, which
        the bridge's answers do not wait for, left out)."""
        start = time.perf_counter()
        argv = [*self.python_argv, "-c", f"{code}; import os; os._exit(0)"]
        subprocess.run(argv, env=self.env, check=True)
        return time.perf_counter() - start


class Homes:
    """The ``CODEX_HOME`` of each start: a fresh one every time (Codex sets up its state
    at each start), or one for all (``warm``: as a user's ``~/.codex``)."""

    def __init__(self, model: ScriptedModel, scratch: Path, *, warm: bool) -> None:
        self.model = model
        self.scratch = scratch
        self.shared = self._new() if warm else None

    def _new(self) -> Path:
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.scratch))
        write_codex_home(home, self.model.base_url)
        return home

    def next(self) -> Path:
        return self.shared or self._new()


class Sample(NamedTuple):
    """One timed start: seconds from the process's start to each answer."""

    initialize: float
    session_new: float
    models: int | None  # listed in the answer to session/new


@dataclass(eq=False)
class Agent:
    """One ACP agent measured: how to start it, where its homes come from, its runs."""

    name: str
    argv: list[str]
    env: dict[str, str]
    homes: Homes
    samples: list[Sample] = field(default_factory=list)
    failed: bool = False
    #: No ACP agent: a bare client of ``argv``'s ``codex app-server`` (the floor).
    bare: bool = False


class StartFailed(Exception):
    """An agent did not start or did not answer; the message says why."""


def without_api_keys(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in API_KEYS}


def models_listed(result: Any) -> int | None:
    """How many models an answer to ``session/new`` lists: its ``model`` config option's
    choices, else ACP's ``models`` (unstable) list."""
    if not isinstance(result, dict):
        return None
    for option in result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("id") == "model":
            return len(option.get("options") or [])
    models = result.get("models")
    if isinstance(models, dict):
        return len(models.get("availableModels") or [])
    return None


def descendants(root: int) -> Iterator[int]:
    pending = [root]
    while pending:
        pid = pending.pop()
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                found = [int(child) for child in children.read_text().split()]
            except OSError:
                continue
            yield from found
            pending += found


def app_server_exe(root: int) -> str | None:
    """The executable of the ``codex app-server`` under ``root``, if one runs."""
    for pid in descendants(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if b"app-server" in argv[1:] and Path(exe).name != "node":
            return exe
    return None


async def codex_run(root: int) -> str:
    """Which ``codex app-server`` runs under ``root``: its executable and version."""
    exe = app_server_exe(root)
    if exe is None:
        return "no codex app-server process under it"
    version = await trio.run_process(
        [exe, "--version"], capture_stdout=True, stderr=subprocess.DEVNULL, check=False
    )
    return f"runs {exe} app-server ({version.stdout.decode().strip()})"


def agent_info(result: Any) -> str:
    info = result.get("agentInfo") if isinstance(result, dict) else None
    if not isinstance(info, dict):
        return "no agentInfo"
    return f"{info.get('name')} {info.get('version')}"


def why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(why(e) for e in exc.exceptions)
    if isinstance(exc, trio.TooSlowError):
        return f"no answer in {REQUEST_TIMEOUT} s"
    if isinstance(exc, RpcError):
        return f"error {exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def stderr_tail(stderr: IO[bytes]) -> str:
    stderr.seek(0)
    text = ANSI_ESCAPE.sub(b"", stderr.read()).decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()][-STDERR_TAIL:]
    if not lines:
        return "    (nothing on its stderr)"
    return "\n".join(f"    | {line}" for line in lines)


async def one_start(agent: Agent, workspace: Path, *, inspect: bool = False) -> tuple[Sample, str]:
    """Start ``agent``, time its answers to ``initialize`` and ``session/new``; with
    ``inspect``, also say what it is and which Codex it runs. ``StartFailed`` if it
    does not start or answer."""
    env = {**agent.env, "CODEX_HOME": str(agent.homes.next())}
    if agent.bare:
        try:
            return await bare_start(agent.argv, env, workspace), "a bare client of it"
        except Exception as exc:
            raise StartFailed(f"failed: {why(exc)}") from exc
    asking = "start"
    process: trio.Process | None = None
    with tempfile.TemporaryFile() as stderr:
        try:
            start = time.perf_counter()
            async with open_agent(agent.argv, env=env, stderr=stderr.fileno()) as (
                client,
                process,
            ):
                asking = "initialize"
                with trio.fail_after(REQUEST_TIMEOUT):
                    info = await client.initialize()
                initialized = time.perf_counter() - start
                asking = "session/new"
                params = {"cwd": str(workspace), "mcpServers": []}
                with trio.fail_after(REQUEST_TIMEOUT):
                    result = await client.request("session/new", params)
                opened = time.perf_counter() - start
                about = f"{agent_info(info)}, {await codex_run(process.pid)}" if inspect else ""
                # Some agents do not exit when their stdin closes: the next start waits for
                # this one to be gone, but not for open_agent's 10 s.
                await close_and_wait(process, close=1, wait=EXIT_WAIT)
                if process.poll() is None:
                    process.kill()
        except Exception as exc:
            status = "" if process is None else f", exit status {process.poll()}"
            raise StartFailed(
                f"failed at {asking}: {why(exc)}{status}; its stderr:\n{stderr_tail(stderr)}"
            ) from exc
    return Sample(initialized, opened, models_listed(result)), about


def sample_line(agent: Agent, sample: Sample, width: int) -> str:
    models = "?" if sample.models is None else str(sample.models)
    return (
        f"  {agent.name:<{width}}  initialize {sample.initialize * 1000:5.0f} ms, "
        f"session/new {sample.session_new * 1000:5.0f} ms ({models} models in the answer)"
    )


async def measure(agents: list[Agent], workspace: Path, runs: int) -> None:
    """The warm-up start of each agent, then ``runs`` rounds of one start of each."""
    width = max(len(agent.name) for agent in agents)

    async def start(agent: Agent, *, inspect: bool = False) -> tuple[Sample, str] | None:
        try:
            return await one_start(agent, workspace, inspect=inspect)
        except StartFailed as exc:
            agent.failed = True
            print(f"  {agent.name:<{width}}  {exc}\n  ({agent.name} is left out from here on)")
            return None

    print("warm-up (untimed):")
    for agent in agents:
        started = await start(agent, inspect=True)
        if started is not None:
            sample, what = started
            print(f"  {agent.name:<{width}}  {what}")
            print(f"  {'':<{width}}  (this first start: {sample_line(agent, sample, 0).strip()})")
    for n in range(runs):
        if all(agent.failed for agent in agents):
            break
        print(f"run {n + 1}:")
        for agent in agents:
            if agent.failed:
                continue
            started = await start(agent)
            if started is not None:
                agent.samples.append(started[0])
                print(sample_line(agent, started[0], width))


def ms_range(seconds: list[float]) -> str:
    return f"{min(seconds) * 1000:.0f}-{max(seconds) * 1000:.0f}"


def ratios(times: list[float], base: list[float]) -> list[str]:
    """The ratio of the medians; the median and range of the per-run ratios."""
    per_run = [t / b for t, b in zip(times, base, strict=True)]
    return [
        f"{statistics.median(times) / statistics.median(base):.2f}",
        f"{statistics.median(per_run):.2f}",
        f"{min(per_run):.2f}-{max(per_run):.2f}",
    ]


def table(agents: list[Agent], baseline: Agent | None) -> list[str]:
    """The end's table, as lines: times in ms, ratios to ``baseline``."""
    parts: list[tuple[str, str, Callable[[Sample], float]]] = [
        ("initialize", "init", lambda s: s.initialize),
        ("session/new", "new", lambda s: s.session_new),
    ]
    header = ["agent"]
    for label, _, _ in parts:
        header += [label, "min-max"]
    if baseline is not None:
        for _, short, _ in parts:
            header += [f"{short} / {baseline.name}", "per run", "range"]
    rows = [header]
    for agent in agents:
        row = [agent.name]
        for _, _, part in parts:
            times = [part(s) for s in agent.samples]
            row += [f"{statistics.median(times) * 1000:.0f} ms", ms_range(times)]
        if baseline is not None:
            for _, _, part in parts:
                if agent is baseline:
                    row += ["1.00", "(baseline)", ""]
                else:
                    times = [part(s) for s in agent.samples]
                    row += ratios(times, [part(s) for s in baseline.samples])
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


async def codex_initialize(program: str, env: Mapping[str, str], home: Path) -> float:
    """Seconds from starting ``program app-server`` to its answer to ``initialize``."""
    request = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"clientInfo": {"name": "bench"}},
    }
    start = time.perf_counter()
    process = await trio.lowlevel.open_process(
        [program, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**env, "CODEX_HOME": str(home)},
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        await process.stdin.send_all(msgspec.json.encode(request) + b"\n")
        buffer = b""
        with trio.fail_after(REQUEST_TIMEOUT):
            while True:
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise RuntimeError(f"{program} app-server ended before answering initialize")
                *lines, buffer = (buffer + chunk).split(b"\n")
                if any(msgspec.json.decode(line).get("id") == 0 for line in lines if line.strip()):
                    return time.perf_counter() - start
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(2):
            await process.wait()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


async def bare_start(argv: list[str], env: Mapping[str, str], workspace: Path) -> Sample:
    """What any adapter that runs ``codex app-server`` waits for at the least: from the
    process's start to its answer to ``initialize``, then (``initialized``, ``model/list``)
    to its answer to ``thread/start`` in the workspace, each asked as soon as it may be."""
    start = time.perf_counter()
    process = await trio.lowlevel.open_process(
        [*argv, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(env),
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    buffer = b""

    async def ask(rid: int, method: str, params: Any) -> Any:
        nonlocal buffer
        request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        await stdin.send_all(msgspec.json.encode(request) + b"\n")
        with trio.fail_after(REQUEST_TIMEOUT):
            while True:
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    message = msgspec.json.decode(line) if line.strip() else {}
                    if message.get("id") == rid and "method" not in message:
                        return message.get("result")
                chunk = await stdout.receive_some()
                if not chunk:
                    raise RuntimeError("codex app-server ended before answering")
                buffer += chunk

    try:
        await ask(0, "initialize", {"clientInfo": {"name": "bench", "version": "0"}})
        initialized = time.perf_counter() - start
        await stdin.send_all(b'{"jsonrpc":"2.0","method":"initialized"}\n')
        listed = await ask(1, "model/list", {})
        await ask(2, "thread/start", {"cwd": str(workspace)})
        opened = time.perf_counter() - start
    finally:
        await close_and_wait(process, close=1, wait=EXIT_WAIT)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    models = listed.get("data") if isinstance(listed, dict) else None
    return Sample(initialized, opened, len(models) if isinstance(models, list) else None)


def summary(name: str, seconds: list[float]) -> str:
    return (
        f"{name}: median {statistics.median(seconds) * 1000:.0f} ms "
        f"(min {min(seconds) * 1000:.0f}, max {max(seconds) * 1000:.0f}) over {len(seconds)} runs"
    )


def python_breakdown(mode: Mode, runs: int) -> None:
    def python(code: str) -> list[float]:
        return [mode.python(code) for _ in range(runs)]

    bare = python("pass")
    print("  " + summary("python start (python -c pass)", bare))
    imports = python(SERVE_IMPORTS)
    print("  " + summary("python start + serve's imports", imports))
    alone = statistics.median(imports) - statistics.median(bare)
    print(f"    (serve's imports alone: ~{alone * 1000:.0f} ms)")


async def codex_breakdown(codex_bin: str, homes: Homes, runs: int) -> None:
    launch = codex_launch(codex_bin, os.environ)
    programs = [("as the bridge runs it", launch.program, launch.env)]
    if launch.program != codex_bin:
        programs.append(("through npm's Node launcher", codex_bin, dict(os.environ)))
    for label, program, env in programs:
        times = [await codex_initialize(program, env, homes.next()) for _ in range(runs)]
        print("  " + summary(f"Codex to initialize answered, {label} ({program})", times))


def load_average() -> str:
    """The machine's 1-minute load average: the ratios move with it."""
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


@dataclass
class Options:
    runs: int
    modes: list[str]
    warm: bool
    peers: list[tuple[str, list[str]]]
    baseline: str | None
    breakdown: bool
    source: Path | None


async def main(options: Options) -> None:
    codex_bin = find_codex()
    launch = codex_launch(codex_bin, os.environ)
    with tempfile.TemporaryDirectory(prefix="bench-open-") as tmp:
        scratch = Path(tmp)
        workspace = scratch / "workspace"
        workspace.mkdir()
        async with trio.open_nursery() as nursery:
            model: ScriptedModel = await nursery.start(serve_scripted_model)

            def homes(name: str) -> Homes:
                own = scratch / name
                own.mkdir(exist_ok=True)
                return Homes(model, own, warm=options.warm)

            modes: list[tuple[Mode, Agent]] = []
            for name in options.modes:
                agent_name = f"bridge-{name}"
                mode = Mode(name, scratch / agent_name, options.source)
                env = {**without_api_keys(mode.env), ENV_CODEX_BIN: codex_bin}
                argv = [*mode.python_argv, "-m", "bridge", "serve", "--no-daemon"]
                argv += ["--log-level", "warning"]
                modes.append((mode, Agent(agent_name, argv, env, homes(agent_name))))
            agents = [agent for _, agent in modes]
            # The floor: Codex's app-server alone, as the bridge runs it, by a bare client.
            floor = Agent("app-server", [launch.program], dict(launch.env), homes("app-server"))
            floor.bare = True
            agents.append(floor)
            peer_env = {**without_api_keys(launch.env), ENV_PEER_CODEX: launch.program}
            for name, argv in options.peers:
                agents.append(Agent(name, argv, dict(peer_env), homes(name)))

            home = (
                "one warm CODEX_HOME for all of an agent's starts"
                if options.warm
                else "a fresh CODEX_HOME for each start"
            )
            print(f"{options.runs} runs, {home}; Codex for the bridge: {codex_bin}")
            before = load_average()
            await measure(agents, workspace, options.runs)
            print(f"load average (1 min) {before} before the starts, {load_average()} after")

            measured = [agent for agent in agents if not agent.failed]
            baseline = next((a for a in measured if a.name == options.baseline), None)
            print(f"medians over {options.runs} runs:")
            if not measured:
                print("  (no agent answered)")
            if options.baseline is not None and baseline is None:
                print(f"  (no ratios: the baseline, {options.baseline}, failed)")
            for line in table(measured, baseline) if measured else []:
                print("  " + line)
            if baseline is not None:
                print(
                    f"  (init, new / {baseline.name}: initialize's and session/new's ratio of "
                    f"the medians; per run, range: the median and range of the ratios run by "
                    f"run, each start's time over {baseline.name}'s in the same run)"
                )

            if options.breakdown:
                for mode, _agent in modes:
                    print(f"breakdown, bytecode {mode.name}:")
                    python_breakdown(mode, options.runs)
                print("breakdown, Codex alone:")
                await codex_breakdown(codex_bin, modes[0][1].homes, options.runs)
            nursery.cancel_scope.cancel()


def peer_option(text: str) -> tuple[str, list[str]]:
    name, equals, command = text.partition("=")
    argv = shlex.split(command)
    if not equals or not name.strip() or not argv:
        raise argparse.ArgumentTypeError(f"expected NAME=COMMAND, got {text!r}")
    return name.strip(), argv


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bytecode", choices=["cached", "compile", "both"], default="both")
    parser.add_argument("--breakdown", action="store_true", help="also time the parts")
    parser.add_argument(
        "--home",
        choices=["fresh", "warm"],
        default="fresh",
        help="a fresh CODEX_HOME for every start (the default), or one for all of an agent's",
    )
    parser.add_argument(
        "--peer",
        type=peer_option,
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="another ACP agent measured beside the bridge (repeatable)",
    )
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help="the agent the others' times are divided by (default: the first peer, if any)",
    )
    parser.add_argument(
        "--source",
        type=Path,
        help="a directory holding another `bridge` package to run (another checkout, "
        "to compare); default: the installed one",
    )
    args = parser.parse_args()
    modes = ["cached", "compile"] if args.bytecode == "both" else [args.bytecode]
    names = [f"bridge-{mode}" for mode in modes] + [name for name, _ in args.peer]
    if len(set(names)) < len(names):
        parser.error(f"agent names must differ: {', '.join(names)}")
    baseline = args.baseline or (args.peer[0][0] if args.peer else None)
    if baseline is not None and baseline not in names:
        parser.error(f"--baseline {baseline}: no such agent (agents: {', '.join(names)})")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    options = Options(
        args.runs, modes, args.home == "warm", args.peer, baseline, args.breakdown, args.source
    )
    trio.run(main, options)
