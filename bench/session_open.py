"""Startup as a one-command client sees it: process start to ``initialize`` answered, and to
the first ``session/new`` answered (which lists every model, so it waits for Codex's
``model/list``, asked at the handshake).

Each run starts ``codex-acp-bridge serve`` (which starts its own ``codex app-server``) with
a fresh ``CODEX_HOME`` pointed at the scripted model, sends ``initialize`` then
``session/new`` at once, and times both answers. Medians and ranges are printed.

    .venv/bin/python bench/session_open.py [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from bridge.acp_client import open_agent
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, find_codex


async def one_run(model: ScriptedModel, codex_bin: str, root: Path) -> tuple[float, float, int]:
    home, workspace = root / "home", root / "workspace"
    home.mkdir()
    workspace.mkdir()
    write_codex_home(home, model.base_url)
    env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
    argv = [sys.executable, "-m", "bridge", "serve", "--no-daemon", "--log-level", "warning"]
    start = time.perf_counter()
    async with open_agent(argv, env=env, stderr=None) as (client, _process):
        await client.initialize()
        initialized = time.perf_counter() - start
        result = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        opened = time.perf_counter() - start
    model_option = next(o for o in result["configOptions"] if o["id"] == "model")
    return initialized, opened, len(model_option["options"])


async def main(runs: int) -> None:
    codex_bin = find_codex()
    async with trio.open_nursery() as nursery:
        model: ScriptedModel = await nursery.start(serve_scripted_model)
        inits: list[float] = []
        opens: list[float] = []
        for n in range(runs):
            with tempfile.TemporaryDirectory(prefix="bench-open-") as tmp:
                initialized, opened, models = await one_run(model, codex_bin, Path(tmp))
            inits.append(initialized)
            opens.append(opened)
            print(
                f"run {n + 1}: initialize {initialized * 1000:.0f} ms, "
                f"session/new {opened * 1000:.0f} ms ({models} models in the answer)"
            )
        nursery.cancel_scope.cancel()
    for name, values in (("initialize answered", inits), ("session/new answered", opens)):
        print(
            f"{name}: median {statistics.median(values) * 1000:.0f} ms "
            f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}) over {runs} runs"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    trio.run(main, parser.parse_args().runs)
