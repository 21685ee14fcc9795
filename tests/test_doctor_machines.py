"""``doctor`` and the machines the user named: the checks as pure functions (every verdict),
then the command against real processes (the pinned Codex's exec-server, run over an ssh).

The ssh side is chosen in one place, :data:`MACHINE`: a stand-in ssh for now
(``tests/support/standin_ssh.py``: the remote shell is ``sh -c`` in a folder here);
``tests/support/sshd.py``'s ``ssh_machine``, a real OpenSSH server on loopback, takes the
same arguments and has the same members.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from bridge.codex.versions import PINNED
from bridge.doctor import (
    Check,
    CodexBinary,
    ExecServer,
    Findings,
    MachineFound,
    as_json,
    checklist,
    exec_server_check,
    machine_checks,
    machine_codex_check,
    machines_error_check,
    reach_check,
    render,
)
from bridge.doctor.findings import ConfigFile, Environment, RuntimeDir
from bridge.doctor.machine_probe import INITIALIZE, login_command, probe_relayed
from bridge.machines import parse_url
from tests.support.doctor import line, run_doctor
from tests.support.standin_ssh import (
    REFUSED_LOGIN,
    UNKNOWN_HOST_KEY,
    StandInMachine,
    failing_ssh,
    shared_folder,
    stand_in_machine,
)

#: The machine the end-to-end tests reach (see the module docstring).
MACHINE = stand_in_machine

HERE = "0.171.0"
REACHED = MachineFound(
    name="box",
    where="me@devbox",
    ssh=True,
    login="ssh -l me devbox",
    local_version=HERE,
    reach_seconds=0.31,
    version_line=f"codex-cli {HERE}",
    server=ExecServer(0.05, executor_version=HERE, shell="bash", cwd="file:///home/me/src"),
)
WS = MachineFound(
    name="lab",
    where="ws://127.0.0.1:4600",
    ssh=False,
    kind="ws",
    login="ws://127.0.0.1:4600",
    local_version=HERE,
    reach_seconds=0.001,
    server=ExecServer(0.01, executor_version=HERE, shell="bash", cwd="file:///srv"),
)


def unreached(words: str, **kw: Any) -> MachineFound:
    return replace(REACHED, unreachable=words, version_line=None, server=None, **kw)


# -- reachable ----------------------------------------------------------------------------------


def test_a_reached_machine_says_how_long_it_took() -> None:
    assert reach_check(REACHED) == Check(
        "machine box: reachable", "ok", "ssh me@devbox: reached in 0.31 s", machine="box"
    )
    assert reach_check(WS).status == "ok"


@pytest.mark.parametrize(
    ("kind", "where", "shown"),
    [
        ("ssh", "me@devbox:2222", "ssh me@devbox:2222"),
        ("podman", "podman container devbox", "podman container devbox"),
        ("docker", "docker container web as dev", "docker container web as dev"),
        ("command", "kubectl exec -i pod/devbox --", "command kubectl exec -i pod/devbox --"),
        ("ws", "ws://127.0.0.1:4600", "ws://127.0.0.1:4600"),
        ("wss", "wss://lab.example:4600", "wss://lab.example:4600"),
        ("devcontainer", "the dev container of /src/app", "the dev container of /src/app"),
        (
            "podman",
            "a podman container of debian:bookworm for each session",
            "a podman container of debian:bookworm for each session",
        ),
    ],
)
def test_a_machine_s_first_line_names_its_kind_and_where_it_is(
    kind: str, where: str, shown: str
) -> None:
    found = replace(REACHED, kind=kind, where=where)
    assert reach_check(found).detail == f"{shown}: reached in 0.31 s"
    missing = replace(found, unreachable="Error: no such container")
    assert reach_check(missing).detail == f"{shown}: Error: no such container"


@pytest.mark.parametrize(
    ("words", "hinted"),
    [
        (
            "No ED25519 host key is known for devbox and you have requested strict checking.; "
            "Host key verification failed.",
            "log in once in a terminal (`ssh -l me devbox`) to accept its host key",
        ),
        (
            "Host key verification failed.",
            "log in once in a terminal (`ssh -l me devbox`) to accept its host key",
        ),
        (
            "Offending ED25519 key in /home/me/.ssh/known_hosts:3; Host key for devbox has "
            "changed and you have requested strict checking.; Host key verification failed.",
            "drop the old key (ssh-keygen -R HOST)",
        ),
        ("me@devbox: Permission denied (publickey).", "BatchMode=yes"),
        ("ssh: connect to host devbox port 22: Connection timed out", "`ssh -l me devbox`"),
        ("no answer from me@devbox within 20 s", "`ssh -l me devbox` in a terminal"),
        ("could not run 'ssh': No such file or directory", "--ssh-command"),
    ],
)
def test_an_unreached_machine_is_named_in_ssh_s_own_words_with_what_to_do(
    words: str, hinted: str
) -> None:
    check = reach_check(unreached(words))
    assert check.status == "error" and check.machine == "box"
    assert check.name == "machine box: reachable"
    assert check.detail == f"ssh me@devbox: {words}"
    assert check.hint is not None and hinted in check.hint


def test_an_unreached_ws_machine_says_how_to_start_its_exec_server() -> None:
    found = replace(WS, unreachable="cannot reach 127.0.0.1:4600: Connection refused", server=None)
    check = reach_check(found)
    assert check.status == "error" and "Connection refused" in check.detail
    assert check.hint is not None and "codex exec-server --listen ws://127.0.0.1:4600" in check.hint


# -- its Codex ----------------------------------------------------------------------------------


def test_the_same_codex_as_here_is_fine() -> None:
    assert machine_codex_check(REACHED) == Check(
        "machine box: Codex", "ok", f"me@devbox: Codex {HERE}, as here", machine="box"
    )
    ws = machine_codex_check(WS)
    assert ws.status == "ok" and f"Codex {HERE}" in ws.detail


def test_another_codex_version_blocks_the_machine_with_both_fixes() -> None:
    check = machine_codex_check(replace(REACHED, version_line="codex-cli 0.170.0"))
    assert check.status == "error"
    assert check.detail == f"me@devbox runs Codex 0.170.0, this machine {HERE}: the link refuses it"
    assert check.hint == (
        f"install Codex {HERE} there (npm install -g @openai/codex@{HERE}), or name it with "
        "?codex=/path/to/codex in the machine's URL"
    )
    ws = machine_codex_check(replace(WS, server=replace(WS.server, executor_version="0.169.0")))  # type: ignore[type-var]
    assert ws.status == "error" and "runs Codex 0.169.0" in ws.detail


def test_no_codex_there_blocks_the_machine_and_says_how_to_name_one() -> None:
    found = replace(
        REACHED,
        codex_failure="'codex' not found: sh: 1: codex: not found",
        version_line=None,
        server=None,
    )
    check = machine_codex_check(found)
    assert check.status == "error"
    assert check.detail == "no Codex on me@devbox: 'codex' not found: sh: 1: codex: not found"
    assert check.hint is not None and "?codex=/path/to/codex" in check.hint
    assert f"npm install -g @openai/codex@{HERE}" in check.hint


def test_a_codex_that_says_no_version_blocks_the_machine() -> None:
    check = machine_codex_check(replace(REACHED, version_line="hello"))
    assert check.status == "error" and "said 'hello', not a version" in check.detail
    assert check.hint is not None and "?codex=" in check.hint


def test_without_a_version_here_the_machine_s_is_not_compared() -> None:
    check = machine_codex_check(replace(REACHED, local_version=None))
    assert check.status == "warning" and "not compared" in check.detail
    assert check.hint == "see 'Codex binary'"
    # With no local version to name, the install hint names the tested one.
    missing = machine_codex_check(
        replace(REACHED, local_version=None, codex_failure="'codex' not found", server=None)
    )
    assert missing.hint is not None and f"@openai/codex@{PINNED}" in missing.hint


def test_an_unreached_machine_s_codex_is_not_tried() -> None:
    check = machine_codex_check(unreached("Host key verification failed."))
    assert check == Check(
        "machine box: Codex",
        "error",
        "not tried: not reached",
        "see 'machine box: reachable'",
        machine="box",
    )


def test_a_ws_exec_server_that_does_not_say_its_version_warns() -> None:
    for said in ("0.0.0", ""):
        found = replace(WS, server=replace(WS.server, executor_version=said))  # type: ignore[type-var]
        check = machine_codex_check(found)
        assert check.status == "warning" and "does not say its Codex version" in check.detail
        assert check.hint is not None and f"Codex {HERE}" in check.hint
        assert "Codex 0.0.0" not in exec_server_check(found).detail


def test_a_ws_machine_s_codex_is_what_its_exec_server_says() -> None:
    failed = replace(
        WS, server=ExecServer(0.0, failure="the exec-server refused its token (HTTP 401)")
    )
    check = machine_codex_check(failed)
    assert check.status == "error" and check.hint == "see 'machine lab: exec-server'"


# -- its exec-server ----------------------------------------------------------------------------


def test_an_exec_server_that_answers_says_where_it_works() -> None:
    assert exec_server_check(REACHED) == Check(
        "machine box: exec-server",
        "ok",
        f"me@devbox: answered initialize in 0.05 s (Codex {HERE}, bash, in /home/me/src)",
        machine="box",
    )


def test_an_exec_server_that_does_not_answer_blocks_the_machine_with_the_command_to_try() -> None:
    found = replace(REACHED, server=ExecServer(10.0, failure="no answer to initialize within 10 s"))
    check = exec_server_check(found)
    assert check.status == "error"
    assert check.detail == "me@devbox: no answer to initialize within 10 s (after 10.00 s)"
    assert (
        check.hint
        == "run `ssh -l me devbox 'codex exec-server --listen stdio'` in a terminal to see what it says"
    )


def test_an_exec_server_not_tried_says_which_line_to_read() -> None:
    assert exec_server_check(unreached("x")).hint == "see 'machine box: reachable'"
    none = exec_server_check(replace(REACHED, codex_failure="'codex' not found", server=None))
    assert none.status == "error" and none.hint == "see 'machine box: Codex'"


def test_a_ws_exec_server_refusing_its_token_says_which_file() -> None:
    refused = replace(
        WS, server=ExecServer(0.01, failure="the exec-server refused its token (HTTP 401)")
    )
    check = exec_server_check(refused)
    assert check.status == "error" and "HTTP 401" in check.detail
    assert check.hint is not None and "--machine-token-file lab=FILE" in check.hint
    other = exec_server_check(
        replace(WS, server=ExecServer(0.01, failure="the WebSocket handshake failed: x"))
    )
    assert other.hint == "check that a Codex exec-server listens at ws://127.0.0.1:4600"


def test_machines_that_cannot_be_used_as_written_block_use() -> None:
    check = machines_error_check("machine bad: 'ftp://x' is not an ssh://, ws:// or wss:// URL")
    assert check.status == "error" and check.name == "Machines" and check.hint


# -- in the checklist ---------------------------------------------------------------------------


def findings(**kw: Any) -> Findings:
    home = Path("/home/ada/.codex")
    return Findings(
        binary=CodexBinary("/usr/bin/codex", source="PATH", version=f"codex-cli {HERE}"),
        handshake=None,
        config=ConfigFile(home / "config.toml", exists=False),
        environment=Environment(home, auth_file=True),
        runtime=RuntimeDir(Path("/run/x"), exists=False),
        choice="Codex: its own",
        **kw,
    )


def test_each_machine_has_its_three_lines_after_the_others_in_order() -> None:
    checks = checklist(findings(machines=(REACHED, WS), machines_error="bad file"))
    names = [c.name for c in checks]
    others = [c.name for c in checklist(findings())]
    assert names[len(others) :] == [
        "Machines",
        "machine box: reachable",
        "machine box: Codex",
        "machine box: exec-server",
        "machine lab: reachable",
        "machine lab: Codex",
        "machine lab: exec-server",
    ]
    assert names[: len(others)] == others


def test_every_machine_error_says_what_to_do_and_names_the_machine() -> None:
    broken = [
        unreached("Host key verification failed."),
        replace(REACHED, codex_failure="'codex' not found", server=None, version_line=None),
        replace(REACHED, version_line="codex-cli 0.1.0", server=ExecServer(1.0, failure="x")),
        replace(WS, unreachable="refused", server=None),
        replace(WS, server=ExecServer(0.0, failure="cannot read its token file /t: No such file")),
    ]
    for found in broken:
        checks = machine_checks(found)
        assert any(c.status == "error" for c in checks)
        for check in checks:
            assert check.machine == found.name and found.name in check.name
            assert check.status == "ok" or check.hint


def test_the_json_names_each_machine_s_checks() -> None:
    shown = as_json(machine_checks(REACHED))
    assert [c["machine"] for c in shown["checks"]] == ["box"] * 3
    assert shown["status"] == "ok"
    text = render(machine_checks(REACHED))
    assert text.splitlines()[0] == "✓ machine box: reachable    ssh me@devbox: reached in 0.31 s"


def test_the_login_to_try_is_the_user_s_ssh_without_the_bridge_s_options() -> None:
    spec = parse_url("box", "ssh://me@devbox:2222/src")
    assert (
        login_command(spec, ["ssh", "-F", "my config"]) == "ssh -F 'my config' -p 2222 -l me devbox"
    )


def test_the_initialize_sent_is_the_one_the_exec_server_accepts() -> None:
    assert json.loads(INITIALIZE) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"clientName": "codex-acp-bridge"},
    }


# -- end to end: doctor against real processes -------------------------------------------------


@pytest.fixture
async def machine(tmp_path: Path, codex_bin: str) -> AsyncIterator[StandInMachine]:
    async with MACHINE(tmp_path / "machine", codex_bin) as found:
        yield found


@pytest.fixture
async def machine_without_codex(tmp_path: Path, codex_bin: str) -> AsyncIterator[StandInMachine]:
    async with MACHINE(tmp_path / "bare-machine", codex_bin, with_codex=False) as found:
        yield found


def doctor_env(bridge_env: dict[str, str]) -> dict[str, str]:
    env = dict(bridge_env)
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY", "CODEX_ACP_BRIDGE_SSH_COMMAND"):
        env.pop(name, None)
    return env


def exec_servers_in(folder: Path) -> list[int]:
    """Processes still running in ``folder`` (an exec-server doctor left behind)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")) == folder:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def machine_args(machine: StandInMachine, name: str = "box", *, query: str = "") -> list[str]:
    return [
        "--machine",
        f"{name}={machine.url}{machine.workspace}{query}",
        "--ssh-command",
        machine.ssh_command,
    ]


async def doctor_on(bridge_env: dict[str, str], *args: str, status: int) -> str:
    """``doctor ARGS`` (a machine's, ``machine_args``): its checklist, once it exited
    ``status``."""
    code, out = await run_doctor(doctor_env(bridge_env), *args)
    assert code == status, out
    return out


@pytest.mark.e2e
async def test_a_machine_that_works_passes_its_three_checks_and_leaves_nothing_running(
    bridge_env: dict[str, str], machine: StandInMachine, codex_version: str
) -> None:
    out = await doctor_on(bridge_env, *machine_args(machine), status=0)
    assert line(out, "machine box: reachable").startswith(
        f"✓ machine box: reachable    ssh {machine.host}: reached in "
    ), out
    assert line(out, "machine box: Codex") == (
        f"✓ machine box: Codex        {machine.host}: Codex {codex_version}, as here"
    )
    server = line(out, "machine box: exec-server")
    assert server.startswith("✓") and "answered initialize in" in server
    # Where the remote shell starts: the stand-in's folder, a real sshd's home.
    assert "bash, in /" in server
    assert exec_servers_in(machine.workspace) == []


@pytest.mark.e2e
async def test_json_has_the_machine_s_checks(
    bridge_env: dict[str, str], machine: StandInMachine
) -> None:
    out = await doctor_on(bridge_env, "--json", *machine_args(machine), status=0)
    shown = [c for c in json.loads(out)["checks"] if c.get("machine") == "box"]
    assert [(c["name"], c["status"]) for c in shown] == [
        ("machine box: reachable", "ok"),
        ("machine box: Codex", "ok"),
        ("machine box: exec-server", "ok"),
    ]


@pytest.mark.e2e
async def test_the_machines_file_is_read(
    bridge_env: dict[str, str], machine: StandInMachine
) -> None:
    machines = Path(bridge_env["CODEX_ACP_BRIDGE_MACHINES"])
    machines.write_text(f'[filed]\nurl = "{machine.url}{machine.workspace}"\n')
    env = {**doctor_env(bridge_env), "CODEX_ACP_BRIDGE_SSH_COMMAND": machine.ssh_command}
    code, out = await run_doctor(env)
    assert code == 0, out
    assert line(out, "machine filed: exec-server").startswith("✓")
    machines.write_text("[broken]\nurl = 3\n")
    code, out = await run_doctor(env)
    assert code == 1, out
    shown = line(out, "Machines")
    assert (
        shown.startswith("✗ Machines") and f'{machines}: [broken] needs url = "ssh://..."' in shown
    )
    assert "serve refuses to start" in shown
    assert line(out, "initialize round trip")[0] in "✓!"  # the rest is still said


@pytest.mark.e2e
async def test_no_codex_there_blocks_the_machine_and_names_the_fix(
    bridge_env: dict[str, str], machine_without_codex: StandInMachine, codex_version: str
) -> None:
    out = await doctor_on(bridge_env, *machine_args(machine_without_codex), status=1)
    assert line(out, "machine box: reachable").startswith("✓")
    shown = line(out, "machine box: Codex")
    assert shown.startswith("✗ machine box: Codex") and "'codex' not found" in shown
    assert f"npm install -g @openai/codex@{codex_version}" in shown and "?codex=" in shown
    assert "not tried: no Codex there" in line(out, "machine box: exec-server")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("variant", "said", "hinted"),
    [
        ("wrong host key", "Host key verification failed.", "ssh-keygen -R HOST"),
        ("unknown host key", "Host key verification failed.", "accept its host key"),
        ("refused login", "Permission denied (publickey).", "BatchMode=yes"),
    ],
)
async def test_ssh_s_refusal_is_said_in_its_own_words(
    bridge_env: dict[str, str],
    machine: StandInMachine,
    tmp_path: Path,
    variant: str,
    said: str,
    hinted: str,
) -> None:
    """The machine's own wrong host key; the other two are ssh's words, stood in for."""
    ssh = {
        "wrong host key": machine.wrong_host_key_command,
        "unknown host key": failing_ssh(tmp_path / "ssh-unknown", UNKNOWN_HOST_KEY),
        "refused login": failing_ssh(tmp_path / "ssh-refused", REFUSED_LOGIN),
    }[variant]
    out = await doctor_on(bridge_env, *machine_args(machine)[:-1], ssh, status=1)
    shown = line(out, "machine box: reachable")
    assert shown.startswith("✗ machine box: reachable") and said in shown and hinted in shown
    assert "not tried: not reached" in line(out, "machine box: Codex")
    assert "not tried: not reached" in line(out, "machine box: exec-server")


def fake_codex(real: str, *, version: str | None = None, exec_server: str | None = None) -> Path:
    """A ``codex`` there that says ``version`` and, for ``exec-server``, runs the shell's
    ``exec_server`` (else the real one's)."""
    folder = shared_folder("codex-acp-bridge-fake-codex-")
    fake = folder / "codex"
    says = (
        f"echo {shlex.quote('codex-cli ' + version)}"
        if version
        else f"exec {shlex.quote(real)} --version"
    )
    serve = exec_server or f'exec {shlex.quote(real)} "$@"'
    fake.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then {says}; exit; fi\n{serve}\n')
    fake.chmod(0o755)
    return fake


async def doctor_with_codex_there(
    bridge_env: dict[str, str], machine: StandInMachine, fake: Path
) -> tuple[int, str]:
    """Doctor on the machine, its Codex ``fake`` (``fake_codex``'s, removed after)."""
    try:
        return await run_doctor(
            doctor_env(bridge_env), *machine_args(machine, query=f"?codex={fake}")
        )
    finally:
        shutil.rmtree(fake.parent)


@pytest.fixture
def native_codex(codex_bin: str) -> str:
    from bridge.shell.codex_process import codex_launch

    return codex_launch(codex_bin, os.environ).program


@pytest.mark.e2e
async def test_another_codex_version_there_is_named_and_the_query_names_another_codex(
    bridge_env: dict[str, str], machine: StandInMachine, native_codex: str, codex_version: str
) -> None:
    code, out = await doctor_with_codex_there(
        bridge_env, machine, fake_codex(native_codex, version="0.170.0")
    )
    assert code == 1, out
    shown = line(out, "machine box: Codex")
    assert f"runs Codex 0.170.0, this machine {codex_version}: the link refuses it" in shown
    assert f"install Codex {codex_version} there" in shown
    # Its exec-server still starts (the real one behind the fake's version).
    assert line(out, "machine box: exec-server").startswith("✓")


@pytest.mark.e2e
async def test_an_exec_server_that_ends_at_once_is_said_with_its_words(
    bridge_env: dict[str, str], machine: StandInMachine, native_codex: str
) -> None:
    code, out = await doctor_with_codex_there(
        bridge_env,
        machine,
        fake_codex(native_codex, exec_server="echo 'error: no exec-server here' >&2; exit 2"),
    )
    assert code == 1, out
    assert line(out, "machine box: Codex").startswith("✓")
    shown = line(out, "machine box: exec-server")
    # Its last words (what `--version` wrote on stderr may come before them).
    assert "the exec-server ended (exit status 2): " in shown
    assert "error: no exec-server here (after " in shown
    assert "exec-server --listen stdio'` in a terminal" in shown


# The bounds, with the probe itself (doctor's own are 20 and 10 s).


@pytest.mark.e2e
async def test_a_machine_that_never_answers_is_given_up_on_within_the_bound(
    machine: StandInMachine, native_codex: str
) -> None:
    hanging = machine.directory / "ssh-hanging"
    hanging.write_text(
        "#!/bin/sh\necho 'debug1: Connecting to devbox port 22.' >&2\nexec sleep 60\n"
    )
    hanging.chmod(0o755)
    spec = parse_url("box", f"{machine.url}{machine.workspace}")
    with trio.fail_after(10):
        found = await probe_relayed(spec, [str(hanging)], HERE, reach_seconds=0.5)
    assert found.unreachable == (
        f"no answer from {machine.host} within 0.5 s: debug1: Connecting to devbox port 22."
    )
    assert found.server is None


@pytest.mark.e2e
async def test_an_exec_server_that_never_answers_is_given_up_on_within_the_bound(
    machine: StandInMachine, native_codex: str
) -> None:
    fake = fake_codex(native_codex, exec_server="exec sleep 60")
    try:
        spec = parse_url("box", f"{machine.url}{machine.workspace}?codex={fake}")
        with trio.fail_after(10):
            found = await probe_relayed(
                spec, shlex.split(machine.ssh_command), HERE, initialize_seconds=0.5
            )
    finally:
        shutil.rmtree(fake.parent)
    assert found.unreachable is None and found.version_line == f"codex-cli {HERE}"
    assert found.server is not None
    assert found.server.failure == "no answer to initialize within 0.5 s"
    assert exec_servers_in(machine.workspace) == []


# -- ws:// machines: an exec-server that runs already ------------------------------------------


@pytest.fixture
async def ws_exec_server(tmp_path: Path, native_codex: str) -> AsyncIterator[tuple[str, Path]]:
    """``codex exec-server --listen ws://127.0.0.1:0`` with a capability token: its URL and
    the token's file."""
    token = tmp_path / "exec-server.token"
    token.write_text("the-token\n")
    token.chmod(0o600)
    process = await trio.lowlevel.open_process(
        [
            native_codex,
            "exec-server",
            "--listen",
            "ws://127.0.0.1:0",
            "--ws-auth",
            "capability-token",
            "--ws-token-file",
            str(token),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        with trio.fail_after(15):
            said = b""
            while b"\n" not in said:
                chunk = await process.stdout.receive_some()
                assert chunk, "the exec-server ended before saying where it listens"
                said += chunk
        yield said.split(b"\n")[0].decode().strip(), token
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


@pytest.mark.e2e
async def test_a_ws_machine_is_reached_and_its_exec_server_answers_with_its_token(
    bridge_env: dict[str, str], ws_exec_server: tuple[str, Path], tmp_path: Path, codex_version: str
) -> None:
    url, token = ws_exec_server
    env = doctor_env(bridge_env)
    args = ["--machine", f"lab={url}", "--machine-token-file", f"lab={token}"]
    code, out = await run_doctor(env, *args)
    assert code == 0, out
    assert line(out, "machine lab: reachable").startswith(f"✓ machine lab: reachable    {url}:")
    assert f"Codex {codex_version}, as here" in line(out, "machine lab: Codex")
    assert line(out, "machine lab: exec-server").startswith("✓")
    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-token")
    code, out = await run_doctor(
        env, "--machine", f"lab={url}", "--machine-token-file", f"lab={wrong}"
    )
    assert code == 1, out
    shown = line(out, "machine lab: exec-server")
    assert "the exec-server refused its token (HTTP 401)" in shown
    assert "--machine-token-file lab=FILE" in shown


@pytest.mark.e2e
async def test_a_ws_machine_nobody_listens_on_is_not_reached(
    bridge_env: dict[str, str], tmp_path: Path
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = tmp_path / "t"
    token.write_text("x")
    code, out = await run_doctor(
        doctor_env(bridge_env),
        "--machine",
        f"lab=ws://127.0.0.1:{port}",
        "--machine-token-file",
        f"lab={token}",
    )
    assert code == 1, out
    shown = line(out, "machine lab: reachable")
    assert f"cannot reach 127.0.0.1:{port}: Connection refused" in shown
    assert "codex exec-server --listen" in shown


async def test_the_exec_servers_words_are_kept_when_they_came_before_the_mark() -> None:
    """ssh's stderr is one stream: the exec-server's first words may be read before the
    version line is, and so before the mark that leaves ``--version``'s words out."""
    from bridge.doctor.machine_probe import _Stderr

    for before, after, shown in (
        (
            b"a warning of --version\n",
            b"error: no exec-server here\n",
            "error: no exec-server here",
        ),
        (b"a warning of --version\nerror: no exec-server here\n", b"", "error: no exec-server"),
    ):
        send, receive = trio.testing.memory_stream_one_way_pair()
        stderr = _Stderr()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stderr.collect, receive)
            await send.send_all(before)
            await trio.testing.wait_all_tasks_blocked()
            stderr.mark()
            if after:
                await send.send_all(after)
            await send.aclose()
            await stderr.finished()
        assert shown in stderr.text(), (before, after, stderr.text())
        if after:
            assert "warning" not in stderr.text()
