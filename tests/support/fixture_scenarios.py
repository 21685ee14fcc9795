"""Record every fixture in ``fixtures/`` from the real Codex: ``scripts/record-fixtures``.

Each scenario (``tests/support/scenarios/``) drives ``codex-acp-bridge record``
(the real bridge, the real, pinned ``codex app-server``, the scripted model on
127.0.0.1) with the project's ACP client, which writes
``fixtures/NAME.codex.jsonl``; the replay of that recording is then written as
``fixtures/NAME.acp.jsonl``, the transcript the replay tests hold the engine to.

    scripts/record-fixtures                 # all scenarios
    scripts/record-fixtures cancel_mid_stream failed_turn
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import tempfile
from pathlib import Path

import trio

from bridge.acp_client import open_agent
from bridge.recording import read_recording, replay
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, find_codex

from . import scenarios
from .app_server import app_server
from .containers import IMAGE, containers_conf, podman_or_skip
from .scenarios import APP_SERVER_ENV, Scenario
from .sshd import ssh_machine

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


def all_scenarios() -> list[Scenario]:
    found: list[Scenario] = []
    for module in sorted(pkgutil.iter_modules(scenarios.__path__), key=lambda m: m.name):
        found += importlib.import_module(f"{scenarios.__name__}.{module.name}").SCENARIOS
    names = [s.name for s in found]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"scenario names used twice: {duplicates}"
    return found


async def record(scenario: Scenario, model: ScriptedModel, codex_bin: str, root: Path) -> Path:
    home = root / f"{scenario.name}-home"
    workspace = root / f"{scenario.name}-workspace"
    home.mkdir()
    workspace.mkdir()
    for relative, text in scenario.files:
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    write_codex_home(home, model.base_url, extra_toml=scenario.extra_toml)
    env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
    env.pop("OPENAI_API_KEY", None)
    out = FIXTURES / f"{scenario.name}.codex.jsonl"
    # The prepared connection and the recorded one share the machines and what the bridge
    # stores of them (which machine each thread worked on), none of them the user's.
    machines = root / f"{scenario.name}-machines.toml"
    env["CODEX_ACP_BRIDGE_MACHINES"] = str(machines)
    env["XDG_STATE_HOME"] = str(root / f"{scenario.name}-state")
    if scenario.sandbox:
        env["CONTAINERS_CONF"] = str(containers_conf(root / f"{scenario.name}-podman"))
        await podman_or_skip(env)
        machines.write_text(f'[sandbox]\nimage = "{IMAGE}"\nruntime = "podman"\n')
    if scenario.prepare is not None:
        serve = [sys.executable, "-m", "bridge", "serve", "--log-level", "info"]
        with (root / f"{scenario.name}.prepare.log").open("wb") as log, trio.fail_after(120):
            async with open_agent(serve, env=env, stderr=log.fileno()) as (client, _process):
                await scenario.prepare(client, str(workspace))
    argv = [sys.executable, "-m", "bridge", "record", "--out", str(out), "--log-level", "info"]
    if scenario.machine:
        async with ssh_machine(root / f"{scenario.name}-sshd", codex_bin) as machine:
            argv += ["--machine", f"box={machine.url}{machine.workspace}"]
            argv += ["--ssh-command", machine.ssh_command]
            with (root / f"{scenario.name}.log").open("wb") as log, trio.fail_after(120):
                async with open_agent(argv, env=env, stderr=log.fileno()) as (client, _process):
                    await scenario.drive(client, str(workspace))
        return out
    with (root / f"{scenario.name}.log").open("wb") as log, trio.fail_after(120):
        if not scenario.attach:
            async with open_agent(argv, env=env, stderr=log.fileno()) as (client, _process):
                await scenario.drive(client, str(workspace))
            return out
        server_dir = root / f"{scenario.name}-app-server"
        server_dir.mkdir()
        async with app_server(codex_bin, home, server_dir) as (url, token, _server):
            argv += ["--codex-url", url, "--codex-token-file", str(token)]
            os.environ[APP_SERVER_ENV] = json.dumps(
                {
                    "codexBin": codex_bin,
                    "codexHome": str(home),
                    "dir": str(server_dir),
                    "port": int(url.rsplit(":", 1)[1]),
                }
            )
            try:
                async with open_agent(argv, env=env, stderr=log.fileno()) as (client, _process):
                    await scenario.drive(client, str(workspace))
            finally:
                del os.environ[APP_SERVER_ENV]
    return out


async def main(names: list[str]) -> None:
    known = all_scenarios()
    chosen = [s for s in known if not names or s.name in names]
    unknown = set(names) - {s.name for s in known}
    if unknown:
        raise SystemExit(f"unknown scenarios: {sorted(unknown)}; known: {[s.name for s in known]}")
    codex_bin = find_codex()
    FIXTURES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="record-fixtures-") as tmp:
        async with trio.open_nursery() as nursery:
            model: ScriptedModel = await nursery.start(serve_scripted_model)
            for scenario in chosen:
                path = await record(scenario, model, codex_bin, Path(tmp))
                transcript = replay(read_recording(path))
                expected = path.with_name(f"{scenario.name}.acp.jsonl")
                expected.write_text(transcript.text())
                print(
                    f"{scenario.name}: {path.name} -> {expected.name} ({len(transcript.lines)} ACP messages)"
                )
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
