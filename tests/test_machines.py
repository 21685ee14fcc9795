"""Machines the user names: how they are read, and what the engine does with them.

The links themselves (ssh, the relay) are tested end to end against a real sshd in
``tests/test_e2e_machines.py``; here, the parts a person can get wrong in a config and the
engine's promises: a machine is offered as the session's ``machine`` option, a turn says
where it acts, and a prompt on a machine waits for its link or fails naming it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bridge import machines
from bridge.engine import MachineOffer, Registration
from bridge.machines import MachineError
from tests.support.engine_harness import Harness


# -- the user's words --------------------------------------------------------------------
def dev_folder(tmp_path: Path, config: str = '{"image": "x"}') -> Path:
    folder = tmp_path / "proj"
    (folder / ".devcontainer").mkdir(parents=True)
    (folder / ".devcontainer" / "devcontainer.json").write_text(config)
    return folder


def test_a_devcontainer_url_names_a_folder_here_and_works_in_its_workspace_folder(
    tmp_path: Path,
) -> None:
    folder = dev_folder(tmp_path)
    spec = machines.parse_flag(f"dc=devcontainer://{folder}?runtime=podman&user=dev")
    assert (spec.scheme, spec.host, spec.path, spec.runtime, spec.user, spec.bring) == (
        "devcontainer",
        str(folder),
        "/workspaces/proj",  # the CLI's default mount
        "podman",
        "dev",
        machines.BRING_IF_NEEDED,
    )
    assert spec.where() == f"the dev container of {folder}"
    assert machines.up_argv(spec) == [
        "devcontainer",
        "up",
        "--workspace-folder",
        str(folder),
        "--docker-path",
        "podman",
    ]
    assert machines.parse_flag(f"dc=devcontainer://{folder}?path=/src").path == "/src"
    named = machines.parse_flag(f"dc=devcontainer://{folder}?codex=/opt/codex/bin/codex")
    assert (named.codex, named.bring, machines.up_argv(named)[-1]) == (
        "/opt/codex/bin/codex",
        "",
        str(folder),
    )


def test_the_workspace_folder_is_read_from_a_configuration_with_comments(tmp_path: Path) -> None:
    folder = dev_folder(
        tmp_path,
        '{\n  // where it works, not "here"\n'
        '  "workspaceFolder": "/src/${localWorkspaceFolderBasename}",\n'
        '  "remoteEnv": {"URL": "http://x//y/*z*/"}, /* kept: in strings */\n'
        '  "image": "x",\n}\n',
    )
    assert machines.parse_flag(f"dc=devcontainer://{folder}").path == "/src/proj"
    # One the bridge cannot read: the CLI's default, checked against what `up` says.
    (folder / ".devcontainer" / "devcontainer.json").write_text('{"workspaceFolder": ')
    assert machines.parse_flag(f"dc=devcontainer://{folder}").path == "/workspaces/proj"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("devcontainer://host/src", "names a folder here"),
        ("devcontainer:///", "names no folder"),
        ("devcontainer:///nowhere/at/all", "no .devcontainer/devcontainer.json"),
        ("devcontainer://{folder}?runtime=lxc", "?runtime= is podman or docker"),
        ("devcontainer://{folder}?image=x", "unknown URL parameter image"),
    ],
)
def test_a_devcontainer_url_that_cannot_be_used_says_why(
    tmp_path: Path, url: str, words: str
) -> None:
    folder = dev_folder(tmp_path)
    with pytest.raises(MachineError, match=re.escape(words)):
        machines.parse_flag(f"dc={url.format(folder=folder)}")


def test_what_devcontainer_up_says_is_the_container_reached(tmp_path: Path) -> None:
    spec = machines.parse_flag(f"dc=devcontainer://{dev_folder(tmp_path)}?runtime=podman")
    said = (
        "[2026-12-05T15:01:20.419Z] a log line\n"
        '{"outcome":"success","containerId":"69790abeacc8740ac3c8bd3b","remoteUser":"vscode",'
        '"remoteWorkspaceFolder":"/workspaces/proj"}\n'
    )
    there = machines.up_container(spec, said)
    assert (there.scheme, there.host, there.user, there.path) == (
        "podman",
        "69790abeacc8",
        "vscode",
        "/workspaces/proj",
    )
    assert machines.exec_server_argv(there, ["ssh"])[:6] == [
        "podman",
        "exec",
        "-i",
        "--user",
        "vscode",
        "69790abeacc8",
    ]
    failed = '{"outcome":"error","message":"Command failed: podman run","description":"An error"}'
    with pytest.raises(MachineError, match=r"devcontainer up for .* failed: Command failed"):
        machines.up_container(spec, failed)
    with pytest.raises(MachineError, match="failed: no answer"):
        machines.up_container(spec, "")
    elsewhere = said.replace("/workspaces/proj", "/home/vscode/proj")
    with pytest.raises(MachineError, match=r"add \?path=/home/vscode/proj"):
        machines.up_container(spec, elsewhere)


def test_an_ssh_url_names_user_host_port_folder_and_remote_codex() -> None:
    spec = machines.parse_flag("devbox=ssh://me@box.example:2222/home/me/src?codex=/opt/codex")
    assert (spec.name, spec.scheme, spec.user, spec.host, spec.port) == (
        "devbox",
        "ssh",
        "me",
        "box.example",
        2222,
    )
    assert (spec.path, spec.codex) == ("/home/me/src", "/opt/codex")
    assert spec.where() == "me@box.example:2222"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("ssh://me@box.example:2222/src", "ssh me@box.example:2222"),
        ("ssh://sshbox", "ssh sshbox"),  # a host whose name begins with the kind
        ("podman://devbox/src", "podman container devbox"),
        ("docker://web?user=dev", "docker container web as dev"),
        ("ws://127.0.0.1:4600", "ws 127.0.0.1:4600"),
    ],
)
def test_a_machine_reads_as_its_kind_and_where_it_is(url: str, shown: str) -> None:
    spec = machines.parse_url("m", url)
    assert machines.kind_and_where(spec.scheme, spec.where()) == shown
    # An older daemon.json says neither.
    assert machines.kind_and_where("", "") == ""


def test_a_dev_container_and_a_sandbox_read_as_their_places_say() -> None:
    folder = machines.MachineSpec(
        name="app", url="devcontainer:///src", scheme="devcontainer", host="/src"
    )
    assert machines.kind_and_where(folder.scheme, folder.where()) == "the dev container of /src"
    sandbox = machines.sandbox_machine("s", {"image": "debian:bookworm"})
    assert machines.kind_and_where(sandbox.scheme, sandbox.where()) == (
        "a podman container of debian:bookworm for each session"
    )
    # doctor's probe of one says the runtime it runs.
    assert machines.kind_and_where("podman", sandbox.where()) == sandbox.where()


def test_an_ssh_url_without_folder_works_in_each_sessions_own_folder() -> None:
    spec = machines.parse_flag("gpu=ssh://gpu")
    assert (spec.user, spec.port, spec.path, spec.codex) == (None, None, "", "codex")


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("devbox", "NAME=URL"),
        ("local=ssh://box", "not 'local'"),
        ("bad name=ssh://box", "letters, digits"),
        ("box=http://box", "not an ssh://"),
        ("box=ssh:///path", "names no host"),
        ("box=ssh://box:99999", "bad port"),
        ("box=ssh://box?shell=zsh", "unknown URL parameter shell"),
        ("box=ws://box:4500?codex=/x", "?codex= is for ssh://"),
        # Containers.
        ("dev=podman://", "names no container"),
        ("dev=podman://bad$name", "not a container's name"),
        ("dev=docker://ctr?shell=sh", "unknown URL parameter shell"),
        ("dev=lxc://ctr", "not an ssh://, podman://, docker://"),
    ],
)
def test_a_machine_written_wrong_is_refused_saying_why(flag: str, words: str) -> None:
    with pytest.raises(MachineError) as caught:
        machines.parse_flag(flag)
    assert words in str(caught.value)


def test_the_machines_file_is_extended_and_overridden_by_flags(tmp_path: Path) -> None:
    file = tmp_path / "machines.toml"
    file.write_text(
        '[devbox]\nurl = "ssh://me@devbox/src"\ndescription = "build box"\n'
        '[gpu]\nurl = "ws://127.0.0.1:4600"\ntoken_file = "' + str(tmp_path / "tok") + '"\n'
    )
    found = machines.gather(["devbox=ssh://other/elsewhere", "extra=ssh://extra"], [], file=file)
    by_name = {m.name: m for m in found}
    assert list(by_name) == ["devbox", "gpu", "extra"]
    assert (by_name["devbox"].host, by_name["devbox"].path) == ("other", "/elsewhere")
    assert by_name["gpu"].token_file == str(tmp_path / "tok")


def test_a_missing_machines_file_is_no_machine(tmp_path: Path) -> None:
    assert machines.gather([], [], file=tmp_path / "none.toml") == []


def test_the_machines_file_lives_in_the_users_config_folder(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert machines.machines_file(env) == tmp_path / "codex-acp-bridge" / "machines.toml"
    env[machines.ENV_MACHINES_FILE] = str(tmp_path / "mine.toml")
    assert machines.machines_file(env) == tmp_path / "mine.toml"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[box]\nhost = 'x'\n", "needs url"),
        ("[box]\nurl = 'ssh://x'\nport = 2\n", "unknown keys: port"),
        ("[box\n", "machines.toml"),
        ("[pod]\ncommand = 'kubectl exec'\n", "command is a list of words"),
        ("[pod]\ncommand = []\n", "command is a list of words"),
        ("[pod]\ncommand = ['sh', '']\n", "command is a list of words"),
        ("[pod]\ncommand = ['sh']\nurl = 'ssh://x'\n", "unknown keys: url"),
        ("[pod]\ncommand = ['sh']\ncodex = 3\n", "codex is the Codex there"),
        ("[pod]\ncommand = ['sh']\ntoken_file = 'x'\n", "unknown keys: token_file"),
        ('[sandbox]\nimage = ""\n', "image names an image"),
        ('[sandbox]\nimage = "x"\nruntime = "lxc"\n', 'runtime is "podman" or "docker"'),
        ('[sandbox]\nimage = "x"\nmount = "some"\n', 'mount is "folders"'),
        (
            '[sandbox]\nimage = "x"\nnetwork = "--privileged"\n',
            "network is a network mode",
        ),
        (
            '[sandbox]\nimage = "x"\nrun_args = "--privileged"\n',
            "run_args is a list of words",
        ),
        ('[sandbox]\nimage = "x"\nurl = "ssh://box"\n', "unknown keys: url"),
    ],
)
def test_a_machines_file_written_wrong_names_the_file(
    tmp_path: Path, text: str, words: str
) -> None:
    file = tmp_path / "machines.toml"
    file.write_text(text)
    with pytest.raises(MachineError) as caught:
        machines.gather([], [], file=file)
    assert words in str(caught.value) and str(file) in str(caught.value)


def test_a_ws_machine_needs_its_token_and_an_ssh_machine_takes_none(tmp_path: Path) -> None:
    none = tmp_path / "none.toml"
    with pytest.raises(MachineError, match="needs its token"):
        machines.gather(["gpu=ws://127.0.0.1:4600"], [], file=none)
    with pytest.raises(MachineError, match="fresh token"):
        machines.gather(["box=ssh://box"], ["box=/tmp/t"], file=none)
    with pytest.raises(MachineError, match="no machine named nope"):
        machines.gather([], ["nope=/tmp/t"], file=none)
    found = machines.gather(["gpu=ws://127.0.0.1:4600"], ["gpu=/tmp/t"], file=none)
    assert found[0].token_file == "/tmp/t"


def test_ssh_runs_as_the_user_configured_it_with_no_prompt_and_the_host_last() -> None:
    spec = machines.parse_flag("box=ssh://me@box:2222")
    ssh = machines.ssh_command("ssh -F '/my config' -i key")
    argv = machines.ssh_argv(spec, ssh, machines.exec_server_command(spec))
    assert argv[:5] == ["ssh", "-F", "/my config", "-i", "key"]
    assert "BatchMode=yes" in argv
    # Nothing that weakens the user's host-key checking.
    assert not any("StrictHostKeyChecking" in a or "KnownHosts" in a for a in argv)
    assert argv[-7:-1] == ["-p", "2222", "-l", "me", "--", "box"]
    assert argv[-1] == "codex --version && exec codex exec-server --listen stdio"


def test_the_ssh_command_comes_from_the_flag_then_the_environment() -> None:
    env = {machines.ENV_SSH_COMMAND: "ssh -o ProxyJump=bastion"}
    assert machines.ssh_command(None, env) == ["ssh", "-o", "ProxyJump=bastion"]
    assert machines.ssh_command("myssh", env) == ["myssh"]
    assert machines.ssh_command(None, {}) == ["ssh"]


def test_a_remote_codex_path_is_quoted_for_the_remote_shell() -> None:
    spec = machines.parse_flag("box=ssh://box?codex=/opt/my%20codex/codex")
    assert machines.version_command(spec) == "'/opt/my codex/codex' --version"


def test_failures_are_told_in_ssh_s_own_words_naming_where() -> None:
    spec = machines.parse_flag("box=ssh://me@box")
    refused = machines.explain_failure(spec, 255, "me@box: Permission denied (publickey).\n")
    assert refused == "ssh to me@box failed: me@box: Permission denied (publickey)."
    missing = machines.explain_failure(spec, 127, "bash: line 1: codex: command not found\n")
    assert missing.startswith("no Codex on me@box") and "?codex=" in missing
    assert machines.codex_version("codex-cli 0.171.0\n") == "0.171.0"


def test_a_container_url_names_runtime_container_user_folder_and_codex_as_written() -> None:
    spec = machines.parse_flag("dev=podman://DevBox_1/src/app?user=me&codex=/opt/codex/bin/codex")
    assert (spec.scheme, spec.host, spec.user, spec.path, spec.codex) == (
        "podman",
        "DevBox_1",  # a container's name keeps its case
        "me",
        "/src/app",
        "/opt/codex/bin/codex",
    )
    assert spec.relayed and not spec.ssh
    assert spec.where() == "podman container DevBox_1 as me"
    docker = machines.parse_flag("d=docker://ctr")
    assert (docker.scheme, docker.host, docker.user, docker.path, docker.codex) == (
        "docker",
        "ctr",
        None,
        "",
        "codex",
    )


def test_a_container_is_reached_with_the_runtimes_exec_and_no_shell() -> None:
    spec = machines.parse_flag("dev=podman://devbox/src?user=me&codex=/opt/codex/bin/codex")
    assert machines.exec_server_argv(spec, ["ssh"]) == [
        "podman", "exec", "-i", "--user", "me", "devbox",
        "/opt/codex/bin/codex", "exec-server", "--listen", "stdio",
    ]  # fmt: skip
    assert machines.version_argv(spec, ["ssh"])[-2:] == ["/opt/codex/bin/codex", "--version"]
    assert not machines.version_first(spec)
    docker = machines.parse_flag("d=docker://ctr")
    assert machines.exec_server_argv(docker, ["ssh"])[:4] == ["docker", "exec", "-i", "ctr"]
    # ssh's remote shell says the version first, as before.
    assert machines.version_first(machines.parse_flag("box=ssh://box"))


def test_a_container_given_no_codex_has_the_bridge_bring_its_own_and_auto_forces_it() -> None:
    assert machines.parse_flag("d=podman://ctr").bring == machines.BRING_IF_NEEDED
    assert machines.parse_flag("d=docker://ctr/src").bring == machines.BRING_IF_NEEDED
    named = machines.parse_flag("d=podman://ctr?codex=/opt/codex/bin/codex")
    assert (named.bring, named.codex) == ("", "/opt/codex/bin/codex")
    auto = machines.parse_flag("d=podman://ctr?codex=auto")
    assert (auto.bring, auto.codex) == (machines.BRING_ALWAYS, "codex")
    assert machines.parse_flag("box=ssh://box").bring == ""
    assert machines.command_machine("pod", ["kubectl", "exec", "-i", "p", "--"]).bring == ""


def test_codex_auto_is_refused_where_the_bridge_cannot_copy_its_codex() -> None:
    with pytest.raises(MachineError) as caught:
        machines.command_machine("pod", ["kubectl", "exec", "-i", "p", "--"], codex="auto")
    assert "cannot copy its Codex through a command" in str(caught.value)


def test_codex_auto_on_an_ssh_machine_brings_it_through_ssh_to_the_users_cache() -> None:
    spec = machines.parse_flag("box=ssh://me@box/src?codex=auto")
    assert (spec.bring, spec.codex) == (machines.BRING_ALWAYS, "codex")
    assert machines.ssh_facts("Linux x86_64\n/home/me/.cache\n", "0.171.0") == (
        "linux/x86_64",
        "/home/me/.cache/codex-acp-bridge/codex-0.171.0",
    )
    assert machines.ssh_facts("no such thing\n", "0.171.0") is None
    assert machines.runs_there("x86_64-unknown-linux-musl", "linux/x86_64")
    assert not machines.runs_there("x86_64-unknown-linux-musl", "darwin/arm64")
    copy = machines.copy_argv(spec, Path("/vendor"), "/home/me/.cache/x.part", ["ssh"])
    assert copy[:5] == ["sh", "-c", 'cd "$1" && shift && tar -cf - . | "$@"', "sh", "/vendor"]
    assert copy[-1] == "mkdir -p /home/me/.cache/x.part && tar -xf - -C /home/me/.cache/x.part"
    assert machines.rename_argv(spec, "/a b", "/c", ["ssh"])[-1] == "mv -T '/a b' /c"


def test_the_codex_brought_is_its_whole_vendor_folder_for_a_linux_container_of_its_arch(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "vendor" / "x86_64-unknown-linux-musl"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "codex").write_text("")
    assert machines.vendor_folder(str(folder / "bin" / "codex")) == (
        folder,
        "x86_64-unknown-linux-musl",
        None,
    )
    (folder / "codex-package.json").write_text(
        '{"version": "0.171.0", "target": "x86_64-unknown-linux-musl"}'
    )
    assert machines.vendor_folder(str(folder / "bin" / "codex")) == (
        folder,
        "x86_64-unknown-linux-musl",
        "0.171.0",
    )
    # A codex that is no package's (a build of one's own, a wrapper script): nothing to copy.
    (tmp_path / "bin").mkdir()
    assert machines.vendor_folder(str(tmp_path / "bin" / "codex")) is None
    assert machines.runs_there("x86_64-unknown-linux-musl", "linux/amd64\n")
    assert machines.runs_there("aarch64-unknown-linux-musl", "linux/arm64/v8")
    assert not machines.runs_there("x86_64-unknown-linux-musl", "linux/arm64")
    assert not machines.runs_there("aarch64-apple-darwin", "linux/arm64")
    assert not machines.runs_there("x86_64-pc-windows-msvc", "windows/amd64")
    spec = machines.parse_flag("d=docker://ctr")
    assert machines.copy_argv(spec, folder, machines.brought_folder("0.171.0")) == [
        "docker", "cp", str(folder), "ctr:/tmp/codex-acp-bridge-codex-0.171.0",
    ]  # fmt: skip


def test_a_command_machine_is_its_command_then_codex_exec_server(tmp_path: Path) -> None:
    file = tmp_path / "machines.toml"
    file.write_text(
        "[pod]\n"
        'command = ["kubectl", "exec", "-i", "-n", "dev", "pod/devbox", "--"]\n'
        'codex = "/opt/codex/bin/codex"\n'
        'path = "/src"\n'
        'description = "the dev pod"\n'
    )
    [spec] = machines.gather([], [], file=file)
    assert (spec.name, spec.scheme, spec.path, spec.description) == (
        "pod",
        "command",
        "/src",
        "the dev pod",
    )
    assert machines.exec_server_argv(spec, ["ssh"]) == [
        "kubectl", "exec", "-i", "-n", "dev", "pod/devbox", "--",
        "/opt/codex/bin/codex", "exec-server", "--listen", "stdio",
    ]  # fmt: skip
    assert spec.where() == "kubectl exec -i -n dev pod/devbox --"
    assert spec.url == "command:kubectl exec -i -n dev pod/devbox --"
    # A flag of the same name replaces it, as for any machine.
    [flagged] = machines.gather(["pod=podman://devbox"], [], file=file)
    assert flagged.scheme == "podman"


def test_a_container_s_failures_are_told_in_the_runtime_s_words_naming_it() -> None:
    spec = machines.parse_flag("dev=podman://devbox")
    missing = machines.explain_failure(
        spec, 125, 'Error: no container with name or ID "devbox" found: no such container\n'
    )
    assert missing == (
        'podman container devbox: Error: no container with name or ID "devbox" found: no such '
        "container"
    )
    no_codex = machines.explain_failure(
        spec, 127, 'Error: runc: exec failed: exec: "codex": executable file not found in $PATH\n'
    )
    assert no_codex.startswith("no Codex in podman container devbox") and "?codex=" in no_codex
    assert "\n" not in missing + no_codex
    pod = machines.command_machine("pod", ["kubectl", "exec", "-i", "pod/x", "--"])
    said = machines.explain_failure(pod, 1, 'error: pods "x" not found\n')
    # kubectl's own failure (exit status 1): its words, not a missing Codex.
    assert said == 'kubectl exec -i pod/x --: error: pods "x" not found'


# -- the engine --------------------------------------------------------------------------

BOX = MachineOffer(
    name="box",
    path="/home/remote/ws",
    description="a box",
    registration=Registration("ws://127.0.0.1:40001", "tok-123"),
)


def machine_option(options: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((o for o in options if o["id"] == "machine"), None)


def opened(h: Harness, thread: dict[str, Any] | None = None) -> dict[str, Any]:
    rid = h.client_request("session/new", {"cwd": "/work", "mcpServers": []})
    start = h.codex_request("thread/start")
    h.codex_reply(
        start["id"],
        {
            "thread": thread or {"id": "thread-1", "cwd": "/work"},
            "model": "mock",
            "approvalPolicy": "on-request",
            "sandbox": {"type": "readOnly"},
        },
    )
    response = h.client_response(rid)
    assert response is not None
    result: dict[str, Any] = response["result"]
    return result


def test_each_machine_is_registered_with_codex_at_its_handshake() -> None:
    h = Harness(ready=False, machines=[BOX])
    init = h.codex_request("initialize")
    h.codex_reply(init["id"], {"userAgent": "codex/0.171.0"})
    added = h.codex_request("environment/add")
    assert added["params"] == {
        "environmentId": "box",
        "execServerUrl": "ws://127.0.0.1:40001",
        "authBearerToken": "tok-123",
    }


def test_machines_are_the_sessions_machine_option_local_first() -> None:
    h = Harness(machines=[BOX])
    option = machine_option(opened(h)["configOptions"])
    assert option is not None
    assert option["name"] == "Machine" and option["currentValue"] == "local"
    assert [v["value"] for v in option["options"]] == ["local", "box"]


def test_without_machines_there_is_no_option_and_turns_say_nothing_of_where() -> None:
    h = Harness()
    assert machine_option(opened(h)["configOptions"]) is None
    h.client_request(
        "session/prompt", {"sessionId": "thread-1", "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert "environments" not in h.codex_request("turn/start")["params"]


def prompt(h: Harness, text: str = "hi") -> int:
    return h.client_request(
        "session/prompt", {"sessionId": "thread-1", "prompt": [{"type": "text", "text": text}]}
    )


def pick(h: Harness, value: str) -> dict[str, Any]:
    rid = h.client_request(
        "session/set_config_option",
        {"sessionId": "thread-1", "configId": "machine", "value": value},
    )
    response = h.client_response(rid)
    assert response is not None
    return response


def test_a_prompt_on_a_machine_waits_for_its_link_then_acts_there() -> None:
    h = Harness(machines=[BOX])
    opened(h)
    sent_before = len(h.to_codex)
    picked = pick(h, "box")
    option = machine_option(picked["result"]["configOptions"])
    assert option is not None and option["currentValue"] == "box"
    assert len(h.to_codex) == sent_before  # a pick goes with the next turn
    prompt(h)
    assert h.machines_wanted == ["box"]
    assert not [m for m in h.to_codex if m.get("method") == "turn/start"]
    h.machine_changed("box", "connecting")
    assert not [m for m in h.to_codex if m.get("method") == "turn/start"]
    h.machine_changed("box", "connected")
    start = h.codex_request("turn/start")
    assert start["params"]["environments"] == [{"environmentId": "box", "cwd": "/home/remote/ws"}]


def test_a_prompt_on_a_machine_that_is_down_fails_naming_it_and_the_session_stays() -> None:
    h = Harness(machines=[BOX])
    opened(h)
    pick(h, "box")
    rid = prompt(h)
    h.machine_changed("box", "down", "ssh to box failed: Host key verification failed.")
    response = h.client_response(rid)
    assert response is not None
    assert response["error"]["message"] == (
        "machine box is not reachable: ssh to box failed: Host key verification failed."
    )
    assert response["error"]["data"] == {"machine": "box"}
    # The session stays; back on this machine, the next prompt runs at once.
    pick(h, "local")
    prompt(h, "again")
    assert h.codex_request("turn/start")["params"]["environments"] == [
        {"environmentId": "local", "cwd": "/work"}
    ]


def prompted_on_connected_box() -> Harness:
    """A session on ``box``, connected, then prompted."""
    h = Harness(machines=[BOX])
    opened(h)
    pick(h, "box")
    h.machine_changed("box", "connected")
    prompt(h)
    return h


def test_a_connected_machine_takes_the_next_prompt_at_once() -> None:
    h = prompted_on_connected_box()
    assert h.machines_wanted == []
    assert h.codex_request("turn/start")["params"]["environments"][0]["environmentId"] == "box"


def test_a_prompt_cancelled_while_its_machine_is_reached_ends_cancelled() -> None:
    h = Harness(machines=[BOX])
    opened(h)
    pick(h, "box")
    rid = prompt(h)
    h.client_notify("session/cancel", {"sessionId": "thread-1"})
    h.machine_changed("box", "connected")
    response = h.client_response(rid)
    assert response is not None and response["result"] == {"stopReason": "cancelled"}
    assert not [m for m in h.to_codex if m.get("method") == "turn/start"]


def test_a_registration_codex_refused_fails_the_prompt_in_codexs_words() -> None:
    h = Harness(ready=False, catalog=False, machines=[BOX])
    init = h.codex_request("initialize")
    h.codex_reply(init["id"], {"userAgent": "codex/0.171.0"})
    h.codex_error(h.codex_request("environment/add")["id"], "bearer token needs TLS")
    h.codex_reply(h.codex_request("model/list")["id"], {"data": []})
    opened(h)
    pick(h, "box")
    rid = prompt(h)
    h.machine_changed("box", "connected")
    response = h.client_response(rid)
    assert response is not None
    assert "Codex refused the machine: bearer token needs TLS" in response["error"]["message"]


def test_a_thread_codex_says_acts_on_a_machine_opens_on_it() -> None:
    h = Harness(machines=[BOX])
    thread = {
        "id": "thread-1",
        "cwd": "/work",
        "environments": [{"environmentId": "box", "cwd": "/home/remote/ws"}],
    }
    option = machine_option(opened(h, thread)["configOptions"])
    assert option is not None and option["currentValue"] == "box"


def test_an_unknown_machine_value_is_refused_listing_the_values() -> None:
    h = Harness(machines=[BOX])
    opened(h)
    response = pick(h, "nowhere")
    assert "local, box" in response["error"]["message"]


def turn_running_on_box() -> Harness:
    """A session on ``box`` (connected), its first turn started."""
    h = prompted_on_connected_box()
    start = h.codex_request("turn/start")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    return h


def command_on_box(command: str) -> tuple[Harness, dict[str, Any]]:
    """A session on ``box``, its turn running ``command`` (started): the harness, the item."""
    h = turn_running_on_box()
    item = {
        "type": "commandExecution",
        "id": "call-1",
        "command": command,
        "cwd": "/home/remote/ws",
        "status": "inProgress",
        "commandActions": [],
    }
    h.codex_notify("item/started", {"threadId": "thread-1", "turnId": "turn-1", "item": item})
    return h, item


def test_a_command_on_a_machine_is_named_with_it() -> None:
    h, _item = command_on_box("/bin/bash -lc 'id -un'")
    calls = [u for u in h.updates("thread-1") if u.get("sessionUpdate") == "tool_call"]
    assert [c["title"] for c in calls] == ["id -un (on box)"]


def test_a_command_whose_machine_dropped_fails_with_the_links_reason() -> None:
    h, item = command_on_box("sleep 20")
    h.machine_changed("box", "down", "box: exit status 137")
    failed = {**item, "status": "failed"}
    h.codex_notify("item/completed", {"threadId": "thread-1", "turnId": "turn-1", "item": failed})
    ended = [u for u in h.updates("thread-1") if u.get("status") == "failed"]
    assert len(ended) == 1
    texts = [c["content"]["text"] for c in ended[0]["content"] if c["type"] == "content"]
    assert "The link to machine box was lost: box: exit status 137" in texts


def test_a_pick_is_stored_and_a_thread_opens_on_its_stored_machine() -> None:
    """Codex forgets a thread's environments when it restarts: the shell keeps the pick."""
    h = Harness(machines=[BOX])
    opened(h)
    pick(h, "box")
    assert h.machines_chosen == [("thread-1", "box")]
    again = Harness(machines=[BOX], stored_machine={"thread-1": "box"}.get)
    # What a resumed thread says after a restart: every machine Codex knows, this one first.
    thread = {
        "id": "thread-1",
        "cwd": "/work",
        "environments": [
            {"environmentId": "local", "cwd": "/work"},
            {"environmentId": "box", "cwd": "/work"},
        ],
    }
    option = machine_option(opened(again, thread)["configOptions"])
    assert option is not None and option["currentValue"] == "box"


def test_a_store_keeps_picks_across_processes_and_forgets_local(tmp_path: Path) -> None:
    from bridge.shell.machine_store import ThreadMachines

    path = tmp_path / "state" / "thread-machines.json"
    ThreadMachines(path).set("t1", "box")
    ThreadMachines(path).set("t2", "gpu")
    assert ThreadMachines(path).get("t1") == "box"
    ThreadMachines(path).set("t1", "local")
    assert ThreadMachines(path).get("t1") is None
    assert ThreadMachines(path).get("t2") == "gpu"
    path.write_text("not json")
    assert ThreadMachines(path).get("t2") is None  # a broken file is no pick, never a crash


def test_after_codex_lost_a_machine_the_next_prompt_there_checks_it_again() -> None:
    """Through the daemon its link is another process's: Codex's word is what this bridge
    hears of a drop."""
    h = turn_running_on_box()
    h.codex_notify(
        "thread/environment/disconnected", {"threadId": "thread-1", "environmentId": "box"}
    )
    h.codex_notify(
        "turn/completed",
        {"threadId": "thread-1", "turn": {"id": "turn-1", "status": "completed", "items": []}},
    )
    rid = prompt(h, "again")
    assert h.machines_wanted == ["box"]
    h.machine_changed("box", "down", "ssh: connect to host box port 22: Connection refused")
    response = h.client_response(rid)
    assert response is not None
    assert "machine box is not reachable: ssh: connect" in response["error"]["message"]


def test_codex_connected_to_a_machine_lets_a_waiting_prompt_go() -> None:
    h = Harness(machines=[BOX])
    opened(h)
    pick(h, "box")
    prompt(h)
    assert h.machines_wanted == ["box"]
    h.codex_notify("thread/environment/connected", {"threadId": "thread-1", "environmentId": "box"})
    assert h.codex_request("turn/start")["params"]["environments"][0]["environmentId"] == "box"


SANDBOX = MachineOffer(
    name="sandbox",
    description="a podman container of debian for each session",
    registration=Registration("ws://127.0.0.1:40002", "tok-456"),
    per_session=True,
)


def test_a_per_session_machine_gives_each_session_an_environment_of_its_own() -> None:
    """Registered at the session's first prompt there (not at the handshake), its URL the
    machine's with the thread as its path; wanted with the session's folders; the turn
    acts in it, in the session's own folder; released when the session closes."""
    h = Harness(machines=[SANDBOX])
    assert not [m for m in h.to_codex if m.get("method") == "environment/add"]
    opened(h)
    pick(h, "sandbox")
    prompt(h)
    own = "sandbox@thread-1"
    added = h.codex_request("environment/add")
    assert added["params"] == {
        "environmentId": own,
        "execServerUrl": "ws://127.0.0.1:40002/thread-1",
        "authBearerToken": "tok-456",
    }
    assert h.machines_wanted == [own] and h.machine_folders[own] == ("/work",)
    h.codex_reply(added["id"], {})
    h.machine_changed(own, "connected")
    start = h.codex_request("turn/start")
    [environment] = start["params"]["environments"]
    assert (environment["environmentId"], environment["cwd"]) == (own, "/work")
    h.codex_reply(start["id"], {"turn": {"id": "turn-1", "status": "inProgress", "items": []}})
    h.complete_turn("thread-1")
    assert h.machines_released == []
    h.client_request("session/close", {"sessionId": "thread-1"})
    assert h.machines_released == [own]


def test_a_machine_the_daemon_registers_is_offered_and_not_registered_again() -> None:
    theirs = MachineOffer(name="box", path="/home/remote/ws", description="a box")
    h = Harness(ready=False, catalog=False, machines=[theirs])
    init = h.codex_request("initialize")
    h.codex_reply(init["id"], {"userAgent": "codex/0.171.0"})
    assert not [m for m in h.to_codex if m.get("method") == "environment/add"]
    h.codex_reply(h.codex_request("model/list")["id"], {"data": []})
    option = machine_option(opened(h)["configOptions"])
    assert option is not None and [v["value"] for v in option["options"]] == ["local", "box"]
    # Its link is the daemon's, which may have dropped unseen here: asked before each prompt.
    pick(h, "box")
    for turn in ("turn-1", "turn-2"):
        prompt(h)
        assert not [m for m in h.to_codex if m.get("method") == "turn/start"]
        h.machine_changed("box", "connected")
        start = h.codex_request("turn/start")
        h.codex_reply(start["id"], {"turn": {"id": turn, "status": "inProgress", "items": []}})
        h.codex_notify(
            "turn/completed",
            {"threadId": "thread-1", "turn": {"id": turn, "status": "completed", "items": []}},
        )
        h.to_codex.clear()
    assert h.machines_wanted == ["box", "box"]


def test_a_reader_asking_often_sees_a_pick_once_the_file_changed(tmp_path: Path) -> None:
    from bridge.shell.machine_store import ThreadMachines

    path = tmp_path / "thread-machines.json"
    reader = ThreadMachines(path)
    assert reader.cached("t1") is None
    ThreadMachines(path).set("t1", "box")
    assert reader.cached("t1") == "box"
    ThreadMachines(path).set("t1", "gpu-host")
    assert reader.cached("t1") == "gpu-host"


def test_a_container_per_session_is_a_machines_file_entry_with_an_image(tmp_path: Path) -> None:
    path = tmp_path / "machines.toml"
    path.write_text(
        '[sandbox]\nimage = "debian:bookworm"\nruntime = "podman"\nmount = "none"\n'
        'network = "none"\nrun_args = ["--memory", "2g"]\n'
    )
    [spec] = machines.read_machines_file(path)
    assert (spec.scheme, spec.image, spec.runtime, spec.mount, spec.network) == (
        "sandbox",
        "debian:bookworm",
        "podman",
        False,
        "none",
    )
    assert spec.where() == "a podman container of debian:bookworm for each session"
    name = machines.sandbox_container(spec, "019a-thread")
    assert name == "codex-acp-bridge-sandbox-019a-thread"
    argv = machines.sandbox_run_argv(spec, name, Path("/v"), ["/work"], "12:34")
    assert argv[:4] == ["podman", "run", "--detach", "--name"]
    assert "/v:/opt/codex-acp-bridge-codex:ro" in argv and "/work:/work" not in argv
    assert argv[-5:] == ["--memory", "2g", "debian:bookworm", "sleep", "infinity"]
    assert f"{machines.OWNER_LABEL}=12:34" in argv
    mounted = replace(spec, mount=True)
    assert "/work:/work" in machines.sandbox_run_argv(mounted, name, Path("/v"), ["/work"], "")


def test_a_brought_codex_is_run_only_when_root_or_the_links_user_owns_it() -> None:
    assert machines.foreign("1000\n0 755\n0 755\n") is None
    assert machines.foreign("1000\n1000 755\n1000 700\n") is None
    assert machines.foreign("1000\n1234 755\n0 755\n") == (
        "owned by uid 1234, not by root or the user Codex runs as (1000)"
    )
    assert machines.foreign("0\n0 775\n0 755\n") == "writable by others (mode 775)"
    assert machines.foreign("") is None  # nothing said: no shell to ask
    argv = machines.owners_argv(machines.parse_flag("b=podman://box?user=dev"), "/tmp/x")
    assert argv[:6] == ["podman", "exec", "--user", "dev", "box", "sh"]
    assert argv[-1] == "/tmp/x"
