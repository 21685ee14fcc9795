"""Clients nobody here wrote, through the daemon the README recommends, with sub-agents at work.

Three sub-agents each run a command the sandbox refuses, so Codex asks for each; the client
allows every request; each child's file must exist afterwards and the parent must say its last
words. Through the daemon, Codex sends a sub-agent's approval request to every connection it
has, the daemon's own watcher among them, and takes the first answer: these tests are what
keeps any connection but the editor's from answering. The clients: acpx (its ``--approve-all``),
the official Python SDK (``agent-client-protocol``, ``tests/support/acp_python_sdk_client.py``)
and the official TypeScript SDK's v2 client (``tools/node/acp_sdk_v2_client.mjs``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.daemon.runtime import ENV_RUNTIME_DIR, read_status
from tests.support.daemon import ATTACHED, running_daemon
from tests.support.e2e import SCENARIO_SECONDS, decode_lines
from tests.support.reading import Ended, session_updates, text_of
from tests.support.scenarios.subagents import call, script, spawn, wait
from tests.test_e2e_acpx import _exec, _session_and_stop, acpx, agent  # noqa: F401
from tests.test_e2e_sdk_client_v2 import _run_sdk_v2_client

pytestmark = pytest.mark.e2e

CHILDREN = (1, 2, 3)


def _child(n: int) -> str:
    return script(
        call(
            "exec_command",
            {
                "cmd": f"touch child-{n}.txt",
                "sandbox_permissions": "require_escalated",
                "justification": f"child {n} writes its file",
            },
        ),
        f"@@ say child {n} wrote",
    )


#: Three children in one step, each asking to run its command; the parent waits for each.
THREE_CHILDREN_WRITE = script(
    "\n".join(spawn(_child(n)) for n in CHILDREN),
    "\n".join(wait(f"{{{{agent_id#{n}}}}}", timeout_ms=60_000) for n in (3, 2, 1)),
    "@@ say all three wrote",
)


@pytest.fixture
async def daemon(bridge_env: dict[str, str], tmp_path: Path) -> Any:
    """A daemon on the test's runtime directory, so every ``serve`` attaches to it."""
    async with running_daemon(
        bridge_env, Path(bridge_env[ENV_RUNTIME_DIR]), tmp_path / "daemon.log"
    ) as running:
        yield running


def _written(workspace: Path) -> list[int]:
    return [n for n in CHILDREN if (workspace / f"child-{n}.txt").exists()]


async def test_acpx_through_the_daemon_lets_every_child_write(
    acpx: str,  # noqa: F811
    agent: Any,  # noqa: F811
    daemon: Any,
    workspace: Path,
) -> None:
    status, messages = await _exec(acpx, agent, workspace, THREE_CHILDREN_WRITE, "--approve-all")
    _name, _env, log = agent
    assert ATTACHED in log.read_text(errors="replace"), "serve did not attach to the daemon"
    assert _written(workspace) == list(CHILDREN)
    asked = [m for m in messages if m.get("method") == "session/request_permission"]
    assert len(asked) == len(CHILDREN)
    assert status == 0
    assert _session_and_stop(messages)[1] == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)).endswith("all three wrote")


async def test_the_python_sdk_through_the_daemon_lets_every_child_write(
    bridge_env: dict[str, str], daemon: Any, workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "bridge.log"
    argv = [
        sys.executable,
        str(Path(__file__).parent / "support" / "acp_python_sdk_client.py"),
        "--cwd",
        str(workspace),
        "--prompt",
        THREE_CHILDREN_WRITE,
        "--timeout",
        str(SCENARIO_SECONDS - 10),
        "--",
        sys.executable,
        "-m",
        "bridge",
        "serve",
        "--log-level",
        "info",
        "--log-file",
        str(log),
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        result = await trio.run_process(
            argv, env=bridge_env, capture_stdout=True, capture_stderr=True, check=False
        )
    events = decode_lines(result.stdout)
    why = f"stderr:\n{result.stderr.decode(errors='replace')[-3000:]}\nlog:\n{log.read_text()[-3000:]}"
    assert result.returncode == 0, why
    assert ATTACHED in log.read_text(errors="replace"), "serve did not attach to the daemon"
    assert _written(workspace) == list(CHILDREN), why
    asked = [e for e in events if e["event"] == "permission"]
    assert len(asked) == len(CHILDREN) and all(e["chosen"] for e in asked), asked
    assert [e for e in events if e["event"] in ("prompt", "error")] == [
        Ended({"event": "prompt", "stopReason": "end_turn"})
    ]
    text = text_of(e["update"] for e in events if e["event"] == "update")
    assert text.endswith("all three wrote"), json.dumps(events[-5:])


async def test_the_typescript_v2_client_through_the_daemon_lets_every_child_write(
    node: str,
    bridge_env: dict[str, str],
    daemon: Any,
    workspace: Path,
) -> None:
    events = await _run_sdk_v2_client(
        node, bridge_env, workspace, "--prompt", THREE_CHILDREN_WRITE, "--permission", "allow_once"
    )
    assert _written(workspace) == list(CHILDREN)
    # Its session is a thread of the daemon's Codex: serve attached (its log is the driver's).
    [session] = {e["result"]["sessionId"] for e in events if "sessionId" in (e.get("result") or {})}
    runtime = Path(bridge_env[ENV_RUNTIME_DIR])
    with trio.fail_after(10):
        while session not in {t.get("threadId") for t in read_status(runtime)}:  # noqa: ASYNC110
            await trio.sleep(0.05)
    asked = [
        e for e in events if e["event"] == "request" and e["method"] == "session/request_permission"
    ]
    assert len(asked) == len(CHILDREN)
