"""acpx, a headless ACP command-line client (npm ``acpx@0.15.1``), driving the real bridge.

acpx runs the bridge the way a user would configure it: ``contrib/acpx/config.json`` is
written to acpx's config file (in a ``HOME`` of the test's own), with only the program
``codex-acp-bridge`` replaced by this Python running ``-m bridge``; the bridge runs the real
Codex against the scripted model (``bridge_env``). Each run is ``acpx ... exec PROMPT``, a
one-shot session that leaves no acpx process behind, with ``--format json``: acpx prints
every ACP message of the conversation as NDJSON, both ways, so the tests read what acpx sent
and what the bridge answered. What the bridge sent is also validated against the ACP schema.

Covered: a prompt; a permission request (an escalated command) answered by acpx's
``--approve-all`` (the command runs) and ``--deny-all`` (it does not; acpx exits with its
status 5, "every permission request denied"); and three Codex sub-agents. acpx declares no
``subagents`` capability, so the bridge shows the sub-agents as tool calls of the parent
(spawns, then waits that carry each child's final message) and no child session reaches
acpx: the tests assert that, and the parent's final text.

acpx 0.15.1 rather than the newest release: 0.16 and later depend on ``@openclaw/fs-safe``,
whose platform packages are missing from npm for some platforms at the versions they
require, so their lock file cannot be made that ``npm ci`` (``scripts/setup``) accepts.
acpx declares Node.js 22.13 or newer; 0.15.1 runs these tests under Node.js 20 as well.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.acp_schema import ConversationValidator
from tests.support.acpx import ACPX, write_acpx_home
from tests.support.e2e import SCENARIO_SECONDS
from tests.support.reading import session_updates, text_of
from tests.support.scenarios.approvals import ESCALATED
from tests.support.scenarios.subagents import CHILD_APPROVAL, CHILD_WORDS, SPAWN_THREE

pytestmark = pytest.mark.e2e

#: acpx's exit status when every permission request of the prompt was denied.
PERMISSION_DENIED = 5

#: Methods an agent sends to a client (everything else with a method goes the other way).
AGENT_METHODS = ("session/update", "session/request_permission", "fs/", "terminal/", "elicitation/")


@pytest.fixture(scope="module")
def acpx() -> str:
    if not ACPX.exists():
        pytest.fail("acpx is needed: run the project's setup (scripts/setup), which installs it")
    return str(ACPX)


@pytest.fixture
def agent(
    bridge_env: dict[str, str], tmp_path: Path, stderr_file: Path
) -> tuple[str, dict[str, str], Path]:
    """The agent name from contrib/acpx/config.json, acpx's environment, and the bridge log
    (``stderr_file``, where the ``route`` fixture looks for the bridge's choice of Codex).

    The config goes to ``$HOME/.acpx/config.json`` of a home of the test's own; its command
    ``codex-acp-bridge serve`` becomes this Python's ``-m bridge serve`` (plus a log file).
    """
    log = stderr_file
    home = tmp_path / "acpx-home"
    name = write_acpx_home(home, log)
    return name, {**bridge_env, "HOME": str(home)}, log


AcpxExec = Callable[..., Awaitable[tuple[int, list[dict[str, Any]]]]]


@pytest.fixture
def acpx_exec(acpx: str, agent: Any, workspace: Path) -> AcpxExec:
    """``status, messages = await acpx_exec(prompt, *options)``: ``acpx exec`` in the
    workspace against the test's agent (``_exec``)."""
    return functools.partial(_exec, acpx, agent, workspace)


async def _exec(
    acpx: str,
    agent: tuple[str, dict[str, str], Path],
    workspace: Path,
    prompt: str,
    *options: str,
) -> tuple[int, list[dict[str, Any]]]:
    """``acpx OPTIONS --format json NAME exec PROMPT`` in ``workspace``: exit status, messages."""
    name, env, log = agent
    argv = [
        acpx,
        "--cwd",
        str(workspace),
        "--format",
        "json",
        "--timeout",
        str(SCENARIO_SECONDS - 10),
        *options,
        name,
        "exec",
        prompt,
    ]
    with trio.fail_after(SCENARIO_SECONDS):
        result = await trio.run_process(
            argv, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    logs = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    why = f"acpx stderr:\n{result.stderr.decode(errors='replace')[-3000:]}\nbridge log:\n{logs}"
    try:
        messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise AssertionError(f"acpx printed something other than JSON: {exc}\n{why}") from exc
    assert messages, why
    _validate_traffic(messages)
    return result.returncode, messages


def _from_agent(message: dict[str, Any], client_requests: dict[Any, str]) -> bool:
    if "method" in message:
        return message["method"].startswith(AGENT_METHODS)
    # A response answers the other side's open request; ids of the two sides can be equal,
    # but never open at once in these conversations, except by shape.
    return message.get("id") in client_requests and "outcome" not in (message.get("result") or {})


def _validate_traffic(messages: list[dict[str, Any]]) -> None:
    """What the bridge sent acpx validates against the ACP v1 schema, answer by answer."""
    validator = ConversationValidator()
    client_requests: dict[Any, str] = {}
    for message in messages:
        if _from_agent(message, client_requests):
            validator.agent_sent(message)
            if "method" not in message:
                client_requests.pop(message["id"], None)
        elif "method" in message and "id" in message:
            client_requests[message["id"]] = message["method"]
            validator.client_sent(message)


def _session_and_stop(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """The session acpx created and how its one prompt ended."""
    [new] = [m for m in messages if m.get("method") == "session/new"]
    [created] = [
        m for m in messages if m.get("id") == new["id"] and "sessionId" in m.get("result", {})
    ]
    [stop] = [m["result"]["stopReason"] for m in messages if "stopReason" in m.get("result", {})]
    return created["result"]["sessionId"], stop


async def test_acpx_prompt(acpx_exec: AcpxExec) -> None:
    status, messages = await acpx_exec("@@ say hello from acpx")
    assert status == 0
    [init] = [m for m in messages if m.get("method") == "initialize"]
    assert init["params"]["clientInfo"]["name"] == "acpx"
    session, stop = _session_and_stop(messages)
    assert stop == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)) == "hello from acpx"
    assert {u["sessionId"] for u in session_updates(messages)} == {session}


def _permission(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one permission request of the run, and acpx's answer."""
    [request] = [m for m in messages if m.get("method") == "session/request_permission"]
    [answer] = [m for m in messages if "outcome" in (m.get("result") or {})]
    assert answer["id"] == request["id"]
    return request["params"], answer["result"]["outcome"]


def _chosen_kind(params: dict[str, Any], outcome: dict[str, Any]) -> str:
    assert outcome["outcome"] == "selected", outcome
    [option] = [o for o in params["options"] if o["optionId"] == outcome["optionId"]]
    return str(option["kind"])


async def test_acpx_approve_all_runs_the_escalated_command(
    route: str, workspace: Path, acpx_exec: AcpxExec
) -> None:
    status, messages = await acpx_exec(ESCALATED, "--approve-all")
    assert status == 0
    params, outcome = _permission(messages)
    assert params["toolCall"]["kind"] == "execute"
    assert "touch approved.txt" in params["toolCall"]["title"]
    assert _chosen_kind(params, outcome) == "allow_once"
    assert (workspace / "approved.txt").exists()
    assert _session_and_stop(messages)[1] == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)) == "done"


async def test_acpx_deny_all_refuses_the_escalated_command(
    workspace: Path, acpx_exec: AcpxExec
) -> None:
    status, messages = await acpx_exec(ESCALATED, "--deny-all")
    assert status == PERMISSION_DENIED
    params, outcome = _permission(messages)
    assert _chosen_kind(params, outcome) == "reject_once"
    assert not (workspace / "approved.txt").exists()
    # The turn itself goes on to its end: Codex is told no, the model says its last words.
    assert _session_and_stop(messages)[1] == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)) == "done"


async def test_acpx_approve_all_runs_a_childs_escalated_command(
    route: str, workspace: Path, acpx_exec: AcpxExec
) -> None:
    """A sub-agent's command: acpx is asked on the parent's session, and its answer is the one
    Codex takes (through a daemon too, whose own connection is sent the request as well)."""
    status, messages = await acpx_exec(CHILD_APPROVAL, "--approve-all")
    params, outcome = _permission(messages)
    assert "child-approved.txt" in params["toolCall"]["title"]
    assert _chosen_kind(params, outcome) == "allow_once"
    assert (workspace / "child-approved.txt").exists()
    assert status == 0
    assert _session_and_stop(messages)[1] == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)) == "parent done"


async def test_acpx_sees_subagents_as_tool_calls(route: str, acpx_exec: AcpxExec) -> None:
    status, messages = await acpx_exec(SPAWN_THREE, "--approve-all")
    assert status == 0
    session, stop = _session_and_stop(messages)
    assert stop == "end_turn"
    assert text_of(u["update"] for u in session_updates(messages)) == "all three reported"
    updates = session_updates(messages)
    # No child session reaches a client without the subagents capability.
    assert {u["sessionId"] for u in updates} == {session}
    calls: dict[str, dict[str, Any]] = {}
    for u in (u["update"] for u in updates):
        if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], {}).update(u)
    spawns = [c for c in calls.values() if c["rawInput"]["tool"] == "spawnAgent"]
    waits = [c for c in calls.values() if c["rawInput"]["tool"] == "wait"]
    assert [c["rawInput"]["prompt"] for c in spawns] == [
        f"@@ say {w} reporting" for w in CHILD_WORDS
    ]
    children = [next(iter(c["rawOutput"]["agentsStates"])) for c in spawns]
    assert all(c["status"] == "completed" for c in spawns + waits)
    # The parent waits for each child once, one wait a child (paired by the child's id:
    # the order the calls reach the client in is Codex's, not the script's).
    assert all(len(c["rawInput"]["targets"]) == 1 for c in waits), waits
    assert sorted(c["rawInput"]["targets"][0] for c in waits) == sorted(children)
    reported = {
        child: state for c in waits for child, state in c["rawOutput"]["agentsStates"].items()
    }
    assert reported == {
        child: {"status": "completed", "message": f"{word} reporting"}
        for child, word in zip(children, CHILD_WORDS, strict=True)
    }
