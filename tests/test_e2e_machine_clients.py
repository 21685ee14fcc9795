"""Sessions on another machine, picked from the clients people use: the official ACP SDK's
v1 and v2 clients and acpx set the session's ``machine`` config option to ``box`` (a real
OpenSSH server on loopback, ``tests/support/sshd.py``) and prompt a command they approve; and
``doctor`` checks that machine, and one it cannot trust, over the same ssh.

What proves where a command ran: it writes ``id -un`` to a file, which is then in the
machine's workspace with the machine's user in it, and not in the session's folder here.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.acpx import ACPX, write_acpx_home
from tests.support.e2e import SCENARIO_SECONDS, run_sdk_driver
from tests.support.reading import Ended, session_updates
from tests.support.sshd import SshMachine, ssh_machine
from tests.test_doctor_machines import doctor_env, run_doctor
from tests.test_e2e_acpx import _validate_traffic
from tests.test_e2e_machines import REMOTE_USER, run
from tests.test_e2e_sdk_client import SDK_CLIENT, _validate_events
from tests.test_e2e_sdk_client_v2 import SDK_V2_CLIENT, _validate

pytestmark = pytest.mark.e2e

#: The command each client approves: who ran it, in a file where it ran.
WHO = run("id -un > who.txt")


@pytest.fixture
async def machine(tmp_path: Path, codex_bin: str) -> AsyncIterator[SshMachine]:
    async with ssh_machine(tmp_path / "sshd", codex_bin) as found:
        yield found


def machine_options(machine: SshMachine, ssh_command: str | None = None) -> list[str]:
    """``--machine box=...`` (its workspace the machine's folder) and ``--ssh-command``."""
    return [
        "--machine",
        f"box={machine.url}{machine.workspace}",
        "--ssh-command",
        ssh_command or machine.ssh_command,
    ]


def ran_on_the_machine(machine: SshMachine, workspace: Path) -> None:
    who = machine.workspace / "who.txt"
    assert who.read_text() == f"{REMOTE_USER}\n"
    assert who.stat().st_uid == machine.uid
    assert not (workspace / "who.txt").exists()


def machine_option(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``machine`` option among a session's (its id is v1's ``id``, v2's ``configId``)."""
    return next(o for o in config_options if o.get("id", o.get("configId")) == "machine")


def failed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bad = ("sdk_rejected", "timeout", "connection_closed", "error")
    return [e for e in events if e["event"] in bad]


def responses(events: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [e["result"] for e in events if e["event"] == "response" and e["method"] == method]


def tool_titles(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["params"]["update"]["title"]
        for e in events
        if e["event"] == "notification"
        and e["method"] == "session/update"
        and "title" in e["params"]["update"]
    ]


# -- the official ACP SDK's clients ------------------------------------------------------------


async def pick_the_box_and_prompt(
    node: str, client: Path, bridge_env: dict[str, str], workspace: Path, machine: SshMachine
) -> list[dict[str, Any]]:
    """The SDK driver ``client`` sets the session's machine to ``box``, prompts ``WHO`` and
    allows it once; its events, once it exited cleanly with no failure among them."""
    result, events = await run_sdk_driver(
        node,
        client,
        bridge_env,
        "--cwd",
        str(workspace),
        "--set-config-option",
        "machine",
        "box",
        "--permission",
        "allow_once",
        "--prompt",
        WHO,
        serve=machine_options(machine),
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert not failed_events(events), events
    return events


async def test_sdk_client_picks_the_machine_and_its_approved_command_runs_there(
    node: str, bridge_env: dict[str, str], workspace: Path, machine: SshMachine
) -> None:
    events = await pick_the_box_and_prompt(node, SDK_CLIENT, bridge_env, workspace, machine)
    [opened] = responses(events, "session/new")
    offered = machine_option(opened["configOptions"])
    assert offered["currentValue"] == "local"
    assert [v["value"] for v in offered["options"]] == ["local", "box"]
    [picked] = responses(events, "session/set_config_option")
    assert machine_option(picked["configOptions"])["currentValue"] == "box"
    [asked] = [e for e in events if e["event"] == "request"]
    assert asked["method"] == "session/request_permission"
    assert "who.txt" in asked["params"]["toolCall"]["title"]
    assert responses(events, "session/prompt") == [Ended({"stopReason": "end_turn"})]
    assert events[-1] == {"event": "exit", "code": 0}
    assert any(t.endswith("(on box)") for t in tool_titles(events)), tool_titles(events)
    ran_on_the_machine(machine, workspace)
    _validate_events(events)


async def test_sdk_v2_client_picks_the_machine_and_its_approved_command_runs_there(
    node: str, bridge_env: dict[str, str], workspace: Path, machine: SshMachine
) -> None:
    events = await pick_the_box_and_prompt(node, SDK_V2_CLIENT, bridge_env, workspace, machine)
    assert events[-1] == {"event": "exit", "code": 0}
    [opened] = responses(events, "session/new")
    assert machine_option(opened["configOptions"])["currentValue"] == "local"
    [picked] = responses(events, "session/set_config_option")
    assert machine_option(picked["configOptions"])["currentValue"] == "box"
    [asked] = [e for e in events if e["event"] == "request"]
    assert asked["method"] == "session/request_permission"
    assert "who.txt" in asked["params"]["title"]
    [answered] = [e for e in events if e["event"] == "answered"]
    assert answered["result"]["outcome"]["outcome"] == "selected"
    assert any(t.endswith("(on box)") for t in tool_titles(events)), tool_titles(events)
    ran_on_the_machine(machine, workspace)
    _validate(events, workspace)


# -- acpx's persistent session -----------------------------------------------------------------


@pytest.fixture
def acpx_home(tmp_path: Path, machine: SshMachine, stderr_file: Path) -> tuple[str, Path]:
    """The agent of contrib/acpx/config.json, its ``codex-acp-bridge serve`` this Python's
    ``-m bridge serve`` with the machine ``box``, in ``$HOME/.acpx/config.json`` of a home of
    the test's own: the agent's name and that home."""
    if not ACPX.exists():
        pytest.fail("acpx is needed: run the project's setup (scripts/setup), which installs it")
    home = tmp_path / "acpx-home"
    return write_acpx_home(home, stderr_file, *machine_options(machine)), home


async def acpx(
    home: Path, env: dict[str, str], workspace: Path, *args: str
) -> tuple[int, str, str]:
    """``acpx --cwd WORKSPACE ARGS`` with acpx's home ``home``: status, stdout, stderr."""
    argv = [str(ACPX), "--cwd", str(workspace), *args]
    with trio.fail_after(SCENARIO_SECONDS):
        done = await trio.run_process(
            argv,
            env={**env, "HOME": str(home)},
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def started_from(home: Path) -> list[int]:
    """The processes whose ``HOME`` is ``home``: acpx's queue owner, the bridge it keeps, and
    theirs."""
    found = []
    needle = f"HOME={home}".encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
    return found


async def test_acpx_sets_the_machine_of_its_session_and_its_prompts_run_there(
    bridge_env: dict[str, str],
    workspace: Path,
    machine: SshMachine,
    acpx_home: tuple[str, Path],
    stderr_file: Path,
) -> None:
    """``sessions new``, ``set machine box``, then two prompts, each a command of its own.

    Each acpx command until the first prompt starts a bridge of its own, and a session never
    prompted does not outlive its bridge's Codex: acpx's resume fails (the bridge says why),
    it opens a fresh session and sends it the selections it saved (``machine`` = ``box``).
    The first prompt's bridge then stays (acpx's queue owner) for the second."""
    name, home = acpx_home

    async def acpx_ok(*args: str) -> str:
        status, out, err = await acpx(home, bridge_env, workspace, *args)
        logs = stderr_file.read_text(errors="replace")[-3000:]
        assert status == 0, f"acpx {args} exited {status}:\n{err[-3000:]}\nbridge log:\n{logs}"
        return out

    async def prompt(text: str) -> list[dict[str, Any]]:
        timeout = str(SCENARIO_SECONDS - 10)
        out = await acpx_ok("--format", "json", "--approve-all", "--timeout", timeout, name, text)
        messages = [json.loads(line) for line in out.splitlines() if line.strip()]
        _validate_traffic(messages)
        [stop] = [
            m["result"]["stopReason"] for m in messages if "stopReason" in m.get("result", {})
        ]
        assert stop == "end_turn", messages
        asked = [m for m in messages if m.get("method") == "session/request_permission"]
        assert len(asked) == 1, messages
        titles = [u["update"].get("title", "") for u in session_updates(messages)]
        assert any(t.endswith("(on box)") for t in titles), titles
        return messages

    try:
        with trio.fail_after(3 * SCENARIO_SECONDS):
            await acpx_ok(name, "sessions", "new")
            out = await acpx_ok("--format", "json", name, "set", "machine", "box")
            [said] = [json.loads(line) for line in out.splitlines() if line.strip()]
            assert (said["action"], said["configId"], said["value"]) == (
                "config_set",
                "machine",
                "box",
            )
            assert machine_option(said["configOptions"])["currentValue"] == "box"

            await prompt(WHO)
            ran_on_the_machine(machine, workspace)
            # The session stays on the machine for its next prompt.
            await prompt(run("touch again.txt"))
            assert (machine.workspace / "again.txt").exists()
            assert not (workspace / "again.txt").exists()

            await acpx_ok(name, "sessions", "close")
            # Closing the session ends the bridge acpx kept for it, and all it ran.
            while started_from(home):  # noqa: ASYNC110 (other processes: poll)
                await trio.sleep(0.1)
    finally:
        for pid in started_from(home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- doctor ------------------------------------------------------------------------------------


def machine_checks_in(out: str) -> dict[str, dict[str, Any]]:
    """doctor --json's checks of the machine ``box``, by name."""
    shown = json.loads(out)
    return {c["name"]: c for c in shown["checks"] if c.get("machine") == "box"}


def left_running_on(machine: SshMachine) -> list[int]:
    """Processes of the machine's own Codex (``tests/support/sshd.py`` copies it to
    ``~/bins/<the workspace's name>/codex`` of the machine's user): an exec-server doctor
    left behind."""
    bins = machine.workspace.parent.parent / "bins" / machine.workspace.name
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "exe")).parent == bins:
                    found.append(int(proc.name))
    return found


async def test_doctor_finds_the_machine_reachable_its_codex_the_same_and_its_exec_server_up(
    bridge_env: dict[str, str], machine: SshMachine, codex_version: str
) -> None:
    code, out = await run_doctor(doctor_env(bridge_env), "--json", *machine_options(machine))
    assert code == 0, out
    checks = machine_checks_in(out)
    assert [(n, c["status"]) for n, c in checks.items()] == [
        ("machine box: reachable", "ok"),
        ("machine box: Codex", "ok"),
        ("machine box: exec-server", "ok"),
    ], out
    assert checks["machine box: reachable"]["detail"].startswith(f"ssh {machine.host}: reached in ")
    assert checks["machine box: Codex"]["detail"] == (
        f"{machine.host}: Codex {codex_version}, as here"
    )
    server = checks["machine box: exec-server"]["detail"]
    # Where the remote shell starts: the machine's user's home.
    home = pwd.getpwnam(REMOTE_USER).pw_dir
    assert server.startswith(f"{machine.host}: answered initialize in "), server
    assert server.endswith(f"(bash, in {home})"), server
    with trio.fail_after(10):
        while left_running_on(machine):  # noqa: ASYNC110 (the machine's processes: poll)
            await trio.sleep(0.1)


async def test_doctor_names_the_machine_whose_host_key_is_wrong_in_ssh_s_words(
    bridge_env: dict[str, str], machine: SshMachine
) -> None:
    wrong = machine_options(machine, machine.wrong_host_key_command)
    code, out = await run_doctor(doctor_env(bridge_env), "--json", *wrong)
    assert code == 1, out
    assert json.loads(out)["status"] == "error"
    checks = machine_checks_in(out)
    reach = checks["machine box: reachable"]
    assert reach["status"] == "error", out
    assert reach["detail"].startswith(f"ssh {machine.host}: "), reach
    assert "has changed and you have requested strict checking." in reach["detail"], reach
    assert reach["detail"].endswith("Host key verification failed."), reach
    assert "drop the old key (ssh-keygen -R HOST)" in reach["hint"], reach
    # The login to try is the user's own ssh, to the machine.
    assert f"`{machine.wrong_host_key_command} {machine.host}`" in reach["hint"], reach
    for name in ("machine box: Codex", "machine box: exec-server"):
        assert checks[name]["status"] == "error"
        assert checks[name]["detail"] == "not tried: not reached"
        assert checks[name]["hint"] == "see 'machine box: reachable'"
