"""Startup as a one-command client sees it: process start to ``initialize`` answered, and to
the first ``session/new`` answered (which lists every model, so it waits for Codex's
``model/list``, asked at the handshake).

Each run starts ``codex-acp-bridge serve`` (which starts its own ``codex app-server``) with
a ``CODEX_HOME`` pointed at the scripted model (``--home``: a fresh one for each run, the
default, where Codex sets up its state as at a first start; or ``warm``, one for all runs,
set up by an untimed run first, as a user's ``~/.codex``), sends ``initialize``, then
``session/new`` once it is answered (as a client must), and times both answers. Medians
and ranges are printed.

``--bytecode`` says how the bridge's own modules load: ``cached`` (from ``.pyc`` files,
as a pip or uvx install has them: ``PYTHONDONTWRITEBYTECODE`` is unset for the bridge,
after an untimed start that writes them), ``compile`` (from source at every start: a
fresh copy of the package without ``__pycache__``, with ``PYTHONDONTWRITEBYTECODE=1``),
or ``both`` (the default). Installed packages (trio, click, ...) load from their
``.pyc`` files either way.

``--breakdown`` also times the parts, each on its own (medians): Python's start
(``python -c pass``), the imports of the ``serve`` path, and Codex's ``app-server``
answering ``initialize`` (the binary the bridge runs, and npm's Node launcher when
that is what was found).

    .venv/bin/python bench/session_open.py [--runs R] [--bytecode cached|compile|both]
                                           [--home fresh|warm] [--breakdown] [--source DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import msgspec
import trio

import bridge
from bridge.acp_client import open_agent
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, codex_launch, find_codex

#: What ``serve`` imports before it can answer anything (``bridge.cli`` then ``serve``'s own).
SERVE_IMPORTS = "import bridge.cli; from bridge.serve import ServeOptions, serve_stdio"
#: Seconds any one request may take before the bench gives up on it.
REQUEST_TIMEOUT = 60


class Mode:
    """How the bridge's modules load: the child's environment and working directory."""

    def __init__(self, name: str, scratch: Path, source: Path | None = None) -> None:
        self.name = name
        self.env = dict(os.environ)
        self.python_argv = [sys.executable]
        if name == "cached":
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            # A copy without __pycache__: every start compiles the bridge's modules, and
            # writes nothing.
            package = source / "bridge" if source else Path(bridge.__file__).parent
            source = scratch / "source"
            shutil.copytree(
                package, source / "bridge", ignore=shutil.ignore_patterns("__pycache__")
            )
            self.env["PYTHONDONTWRITEBYTECODE"] = "1"
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


async def one_run(
    mode: Mode, codex_bin: str, home: Path, workspace: Path
) -> tuple[float, float, int]:
    env = {**mode.env, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
    argv = [*mode.python_argv, "-m", "bridge", "serve", "--no-daemon", "--log-level", "warning"]
    start = time.perf_counter()
    async with open_agent(argv, env=env, stderr=None) as (client, _process):
        with trio.fail_after(REQUEST_TIMEOUT):
            await client.initialize()
        initialized = time.perf_counter() - start
        params = {"cwd": str(workspace), "mcpServers": []}
        with trio.fail_after(REQUEST_TIMEOUT):
            result = await client.request("session/new", params)
        opened = time.perf_counter() - start
    model_option = next(o for o in result["configOptions"] if o["id"] == "model")
    return initialized, opened, len(model_option["options"])


def summary(name: str, seconds: list[float]) -> str:
    return (
        f"{name}: median {statistics.median(seconds) * 1000:.0f} ms "
        f"(min {min(seconds) * 1000:.0f}, max {max(seconds) * 1000:.0f}) over {len(seconds)} runs"
    )


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


async def breakdown(codex_bin: str, mode: Mode, homes: Homes, runs: int) -> None:
    def python(code: str) -> list[float]:
        return [mode.python(code) for _ in range(runs)]

    bare = statistics.median(python("pass"))
    print("  " + summary("python start (python -c pass)", python("pass")))
    imports = python(SERVE_IMPORTS)
    print("  " + summary("python start + serve's imports", imports))
    print(f"    (serve's imports alone: ~{(statistics.median(imports) - bare) * 1000:.0f} ms)")
    launch = codex_launch(codex_bin, os.environ)
    programs = [("as the bridge runs it", launch.program, launch.env)]
    if launch.program != codex_bin:
        programs.append(("through npm's Node launcher", codex_bin, dict(os.environ)))
    for label, program, env in programs:
        times = [await codex_initialize(program, env, homes.next()) for _ in range(runs)]
        print("  " + summary(f"Codex to initialize answered, {label} ({program})", times))


async def main(
    runs: int, bytecode: str, show_breakdown: bool, source: Path | None, warm: bool
) -> None:
    codex_bin = find_codex()
    modes = ["cached", "compile"] if bytecode == "both" else [bytecode]
    async with trio.open_nursery() as nursery:
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        for name in modes:
            with tempfile.TemporaryDirectory(prefix="bench-open-") as tmp:
                scratch = Path(tmp)
                mode = Mode(name, scratch, source)
                homes = Homes(model, scratch, warm=warm)
                workspace = scratch / "workspace"
                workspace.mkdir()
                print(f"bytecode {name}, {'one warm' if warm else 'a fresh'} CODEX_HOME:")
                if name == "cached" or warm:  # writes the .pyc files, sets the home up
                    await one_run(mode, codex_bin, homes.next(), workspace)
                inits: list[float] = []
                opens: list[float] = []
                for n in range(runs):
                    initialized, opened, models = await one_run(
                        mode, codex_bin, homes.next(), workspace
                    )
                    inits.append(initialized)
                    opens.append(opened)
                    print(
                        f"  run {n + 1}: initialize {initialized * 1000:.0f} ms, "
                        f"session/new {opened * 1000:.0f} ms ({models} models in the answer)"
                    )
                print("  " + summary("initialize answered", inits))
                print("  " + summary("session/new answered", opens))
                if show_breakdown:
                    await breakdown(codex_bin, mode, homes, runs)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bytecode", choices=["cached", "compile", "both"], default="both")
    parser.add_argument("--breakdown", action="store_true", help="also time the parts")
    parser.add_argument(
        "--home",
        choices=["fresh", "warm"],
        default="fresh",
        help="a fresh CODEX_HOME for every start (the default), or one for all",
    )
    parser.add_argument(
        "--source",
        type=Path,
        help="a directory holding another `bridge` package to run (another checkout, "
        "to compare); default: the installed one",
    )
    args = parser.parse_args()
    trio.run(main, args.runs, args.bytecode, args.breakdown, args.source, args.home == "warm")
