"""Record every fixture in ``fixtures/`` from the real Codex: ``scripts/record-fixtures``.

Each scenario drives ``codex-acp-bridge record`` (the real bridge, the real
``codex app-server`` 0.169, the scripted model on 127.0.0.1) with the project's
ACP client, which writes ``fixtures/NAME.codex.jsonl``; the replay of that
recording is then written as ``fixtures/NAME.acp.jsonl``, the transcript the
replay tests hold the engine to.

    scripts/record-fixtures                 # all scenarios
    scripts/record-fixtures cancel_mid_stream failed_turn
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from bridge.acp_client import AcpClient, open_agent
from bridge.jsonrpc import RpcError
from bridge.recording import read_recording, replay
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, find_codex

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"

Drive = Callable[[AcpClient, str], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    drive: Drive
    capabilities: dict[str, Any] | None = None


async def _prompt(client: AcpClient, workspace: str, *texts: str) -> str:
    await client.initialize()
    session = await client.new_session(workspace)
    for text in texts:
        await client.prompt(session, text)
    return session


async def streamed_answer(client: AcpClient, workspace: str) -> None:
    await _prompt(client, workspace, "@@ words 40")


async def reasoning(client: AcpClient, workspace: str) -> None:
    await _prompt(client, workspace, "@@ reason 8\n@@ words 12")


async def cancel_mid_stream(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    session = await client.new_session(workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, "@@ words 2000 delay_ms=10")
        await client.wait_for(lambda _m: len(client.text_of(session).split()) >= 15)
        await client.notify("session/cancel", {"sessionId": session})
    await client.prompt(session, "@@ words 3")


async def failed_turn(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    session = await client.new_session(workspace)
    try:
        await client.prompt(session, "@@ words 3\n@@ fail")
    except RpcError:
        pass
    else:
        raise AssertionError("the turn was expected to fail")


async def bad_input(client: AcpClient, workspace: str) -> None:
    await client.send_raw(b'{"jsonrpc":"2.0","id":"x","method":')
    await client.initialize()
    session = await client.new_session(workspace)
    for method, params in [
        ("session/teleport", {}),
        ("session/new", {"cwd": "relative/path", "mcpServers": []}),
        (
            "session/prompt",
            {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "x"}]},
        ),
        (
            "session/prompt",
            {
                "sessionId": session,
                "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}],
            },
        ),
    ]:
        with contextlib.suppress(RpcError):  # each answers with an error: that is the point
            await client.request(method, params)
    await client.prompt(session, "@@ say still here")


SCENARIOS = [
    Scenario("streamed_answer", "a plain streamed answer of 40 words", streamed_answer),
    Scenario("reasoning", "a reasoning summary streamed before the answer", reasoning),
    Scenario(
        "cancel_mid_stream", "session/cancel mid-stream, then another prompt", cancel_mid_stream
    ),
    Scenario(
        "failed_turn", "the model stream breaks: the turn fails with Codex's message", failed_turn
    ),
    Scenario(
        "bad_input", "malformed JSON, unknown method, invalid params, unknown session", bad_input
    ),
]


async def record(scenario: Scenario, model: ScriptedModel, codex_bin: str, root: Path) -> Path:
    home = root / f"{scenario.name}-home"
    workspace = root / f"{scenario.name}-workspace"
    home.mkdir()
    workspace.mkdir()
    write_codex_home(home, model.base_url)
    env = {**os.environ, "CODEX_HOME": str(home), ENV_CODEX_BIN: codex_bin}
    env.pop("OPENAI_API_KEY", None)
    out = FIXTURES / f"{scenario.name}.codex.jsonl"
    argv = [sys.executable, "-m", "bridge", "record", "--out", str(out), "--log-level", "info"]
    with (root / f"{scenario.name}.log").open("wb") as log, trio.fail_after(120):
        async with open_agent(argv, env=env, stderr=log.fileno()) as (client, _process):
            await scenario.drive(client, str(workspace))
    return out


async def main(names: list[str]) -> None:
    chosen = [s for s in SCENARIOS if not names or s.name in names]
    unknown = set(names) - {s.name for s in SCENARIOS}
    if unknown:
        raise SystemExit(
            f"unknown scenarios: {sorted(unknown)}; known: {[s.name for s in SCENARIOS]}"
        )
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
                    f"{scenario.name}: {path.name} → {expected.name} ({len(transcript.lines)} ACP messages)"
                )
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
