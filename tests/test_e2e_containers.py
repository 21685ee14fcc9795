"""Sessions in containers, end to end: the real Codex here, real podman containers of the
test's own (``tests/support/containers.py``: Debian's podman with runc, a Debian image built
on this machine, the pinned Codex's vendor folder mounted read-only at ``/opt/codex``), and
the bridge's link running ``podman exec -i CONTAINER /opt/codex/bin/codex exec-server
--listen stdio`` per Codex connection.

What proves where a command ran: the machine's folder (``/srv/work``) exists only inside the
container (nothing of the test's is mounted there), and a command's ``hostname`` is the
container's.

A container with no Codex in it (no ``?codex=`` in the URL either) is given the bridge's own:
its vendor folder copied with ``podman cp`` to ``/tmp/codex-acp-bridge-codex-VERSION`` once.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.jsonrpc import RpcError
from bridge.machines import parse_url
from bridge.shell.machine_link import MachineLinks
from tests.support.containers import (
    CODEX_IN,
    Container,
    containers_conf,
    podman_or_skip,
    running_container,
    vendor_folder,
)
from tests.support.daemon import StartDaemon
from tests.support.daemon import serve_argv as daemon_serve_argv
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.scenarios.approvals import approving
from tests.test_doctor_machines import doctor_env, line, run_doctor
from tests.test_e2e_daemon import status_json
from tests.test_e2e_machines import adds, option, run, set_machine, tool_texts

pytestmark = pytest.mark.e2e

#: The machine's folder: inside the container only.
THERE = "/srv/work"


@pytest.fixture
async def container(tmp_path: Path, bridge_env: dict[str, str]) -> AsyncIterator[Container]:
    """A running container; ``bridge_env`` (the bridge's, the daemon's) given its
    ``CONTAINERS_CONF``."""
    bridge_env["CONTAINERS_CONF"] = str(containers_conf(tmp_path / "podman"))
    await podman_or_skip(bridge_env)
    async with running_container(bridge_env) as found:
        await found.exec("mkdir", "-p", THERE)
        yield found


def podman_url(container: Container) -> str:
    return f"podman://{container.name}{THERE}?codex={CODEX_IN}"


OpenOn = Callable[..., AbstractAsyncContextManager[Conversation]]


@pytest.fixture
def open_on(
    open_conversation: OpenConversation, bridge_argv: list[str], bridge_env: dict[str, str]
) -> OpenOn:
    """``open_on(*machines)``: a conversation whose bridge (no daemon) has ``--machine``
    each of ``machines``, and the machines file of ``bridge_env``."""

    def start(*machines: str) -> AbstractAsyncContextManager[Conversation]:
        argv = [*bridge_argv, "--no-daemon"]
        for each in machines:
            argv += ["--machine", each]
        return open_conversation(argv=argv, env=bridge_env, on_request=approving([]))

    return start


OnBox = Callable[[str], AbstractAsyncContextManager[Conversation]]


@pytest.fixture
def on_box(open_on: OpenOn) -> OnBox:
    """``on_box(url)``: a conversation whose bridge (no daemon) has machine ``box`` at
    ``url``, its session moved there."""

    @asynccontextmanager
    async def start(url: str) -> AsyncIterator[Conversation]:
        async with open_on(f"box={url}") as talk:
            await set_machine(talk, "box")
            yield talk

    return start


OpenAttached = Callable[[], AbstractAsyncContextManager[Conversation]]


@pytest.fixture
def open_attached(
    open_conversation: OpenConversation, runtime: Path, bridge_env: dict[str, str]
) -> OpenAttached:
    """``open_attached()``: a conversation of an editor attached to the test's daemon,
    allowing every permission request."""

    def start() -> AbstractAsyncContextManager[Conversation]:
        argv = daemon_serve_argv(runtime)
        return open_conversation(argv=argv, env=bridge_env, on_request=approving([]))

    return start


async def inside(container: Container, name: str, *why: object) -> str:
    """A file of the machine's folder, read inside the container; when it cannot be read,
    the failure says so with ``why`` (what the session showed, the bridge's log)."""
    try:
        return await container.exec("cat", f"{THERE}/{name}")
    except AssertionError as missing:
        raise AssertionError("\n".join([str(missing), *map(str, why)])) from None


async def test_a_session_in_a_container_runs_commands_and_patches_there(
    open_on: OpenOn, container: Container, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on(f"box={podman_url(container)}") as talk:
            machines = option(talk.opened["configOptions"], "machine")
            assert [v["value"] for v in machines["options"]] == ["local", "box"]
            await set_machine(talk, "box")
            await talk.said(run("hostname > who.txt; pwd >> who.txt"))
            await talk.said(adds("note.txt", "written in the container"))
    hostname = (await container.exec("hostname")).strip()
    assert (await inside(container, "who.txt")).split() == [hostname, THERE]
    assert await inside(container, "note.txt") == "written in the container\n", tool_texts(talk)
    # The Codex named with ?codex= ran: none was brought.
    assert await brought(container) == []
    # Nothing of it here: not in the session's folder, and no such folder on this machine.
    assert not Path(THERE).exists()
    assert not (workspace / "who.txt").exists() and not (workspace / "note.txt").exists()


async def test_a_command_machine_runs_its_own_words_then_codex_there(
    open_on: OpenOn, container: Container, bridge_env: dict[str, str], workspace: Path
) -> None:
    """``command = [...]`` in the machines file: ``podman exec -i CONTAINER`` as it is, and
    the same behind a shell wrapper (the kind a cloud CLI or ``kubectl exec`` would be)."""
    wrapper = ["sh", "-c", f'exec podman exec -i {shlex.quote(container.name)} "$@"', "sh"]
    Path(bridge_env["CODEX_ACP_BRIDGE_MACHINES"]).write_text(
        "[pod]\n"
        f"command = {toml_list(['podman', 'exec', '-i', container.name])}\n"
        f'codex = "{CODEX_IN}"\n'
        f'path = "{THERE}"\n'
        "[wrapped]\n"
        f"command = {toml_list(wrapper)}\n"
        f'codex = "{CODEX_IN}"\n'
        f'path = "{THERE}"\n'
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            machines = option(talk.opened["configOptions"], "machine")
            assert [v["value"] for v in machines["options"]] == ["local", "pod", "wrapped"]
            await set_machine(talk, "pod")
            await talk.said(run("hostname > pod.txt"))
            await set_machine(talk, "wrapped")
            await talk.said(adds("wrapped.txt", "through a wrapper"))
    hostname = (await container.exec("hostname")).strip()
    assert (await inside(container, "pod.txt")).strip() == hostname
    assert await inside(container, "wrapped.txt") == "through a wrapper\n", tool_texts(talk)
    assert not (workspace / "pod.txt").exists() and not (workspace / "wrapped.txt").exists()


async def test_through_the_daemon_a_command_machine_of_the_machines_file_both_read_works(
    start_daemon: StartDaemon,
    open_attached: OpenAttached,
    container: Container,
    bridge_env: dict[str, str],
) -> None:
    """The daemon publishes a command machine; the attached editor's bridge, which reads the
    same machines file, checks it with that file's command (never one from daemon.json)."""
    Path(bridge_env["CODEX_ACP_BRIDGE_MACHINES"]).write_text(
        "[pod]\n"
        f"command = {toml_list(['podman', 'exec', '-i', container.name])}\n"
        f'codex = "{CODEX_IN}"\n'
        f'path = "{THERE}"\n'
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon("--no-page"), open_attached() as talk:
            machines = option(talk.opened["configOptions"], "machine")
            assert [v["value"] for v in machines["options"]] == ["local", "pod"]
            await set_machine(talk, "pod")
            await talk.said(run("hostname > pod.txt"))
    hostname = (await container.exec("hostname")).strip()
    assert (await inside(container, "pod.txt")).strip() == hostname


def toml_list(words: list[str]) -> str:
    return (
        "["
        + ", ".join('"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in words)
        + "]"
    )


async def test_a_stopped_container_fails_the_next_prompt_naming_it_and_works_once_started(
    on_box: OnBox, container: Container, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(podman_url(container)) as talk:
            await talk.said(run("touch one.txt"))
            await container.stop()
            # The link hears of it as its podman exec ends.
            while "machine box is down" not in stderr_file.read_text():  # noqa: ASYNC110
                await trio.sleep(0.05)
            with trio.fail_after(10), pytest.raises(RpcError) as caught:
                await talk.prompt(run("touch two.txt"))
            message = str(caught.value)
            assert "machine box is not reachable" in message, message
            assert f"podman container {container.name}" in message, message
            assert "state improper" in message, message  # podman's own words
            assert "\n" not in message
            await container.start()
            await talk.said(run("touch three.txt"))
    listed = (await container.exec("ls", THERE)).split()
    assert "one.txt" in listed and "three.txt" in listed and "two.txt" not in listed


async def test_a_missing_container_fails_the_prompt_in_podman_s_words(
    on_box: OnBox, container: Container
) -> None:
    missing = f"{container.name}-gone"
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(f"podman://{missing}{THERE}?codex={CODEX_IN}") as talk:
            with trio.fail_after(10), pytest.raises(RpcError) as caught:
                await talk.prompt(run("touch nope.txt"))
    message = str(caught.value)
    assert "machine box is not reachable" in message, message
    assert f'no container with name or ID "{missing}" found' in message, message


async def test_doctor_names_a_missing_container_and_passes_a_running_one(
    container: Container, bridge_env: dict[str, str]
) -> None:
    missing = f"{container.name}-gone"
    args = ["--machine", f"gone=podman://{missing}", "--machine", f"box={podman_url(container)}"]
    code, out = await run_doctor(doctor_env(bridge_env), *args)
    assert code == 1, out
    gone = line(out, "machine gone: reachable")
    assert gone.startswith("✗"), out
    assert f'podman container {missing}: Error: no container with name or ID "{missing}"' in gone
    assert "podman ps -a" in gone  # what to do about it
    reached = line(out, "machine box: reachable")
    assert reached.startswith("✓"), out
    assert f"podman container {container.name}: reached in " in reached, out
    assert line(out, "machine box: Codex").startswith("✓"), out
    server = line(out, "machine box: exec-server")
    assert server.startswith("✓") and "answered initialize in" in server, out


OnBoxViaDaemon = Callable[[str], AbstractAsyncContextManager[Conversation]]


@pytest.fixture
def on_box_via_daemon(start_daemon: StartDaemon, open_attached: OpenAttached) -> OnBoxViaDaemon:
    """``on_box_via_daemon(url)``: a daemon with machine ``box`` at ``url``, and an editor
    attached to it whose session works there: it has run one command there
    (``hostname > who.txt``)."""

    @asynccontextmanager
    async def start(url: str) -> AsyncIterator[Conversation]:
        async with start_daemon("--machine", f"box={url}", "--no-page"), open_attached() as talk:
            await set_machine(talk, "box")
            await talk.said(run("hostname > who.txt"))
            yield talk

    return start


async def rewinds_a_patch_there(talk: Conversation, container: Container) -> None:
    """A patch in the container's folder, then ``/rewind``: undone there."""
    await talk.said(adds("a.txt", "one"))
    assert await inside(container, "a.txt") == "one\n", tool_texts(talk)
    answer = await talk.said("/rewind")
    assert "**Rewound 1 prompt.**" in answer, answer
    assert "Files returned to what they were (on box):" in answer, answer


async def ran_there_and_rewound(container: Container) -> None:
    """What :func:`on_box_via_daemon` ran is there; the patch :func:`rewinds_a_patch_there`
    made is not."""
    hostname = (await container.exec("hostname")).strip()
    assert (await inside(container, "who.txt")).strip() == hostname
    assert not await container.exists_inside(f"{THERE}/a.txt")


async def test_through_the_daemon_a_session_works_in_the_container_and_rewinds_there(
    on_box_via_daemon: OnBoxViaDaemon,
    container: Container,
    runtime: Path,
    bridge_env: dict[str, str],
    workspace: Path,
) -> None:
    """The daemon runs the link; an editor attached to it is offered the machine, its
    commands run in the container, and its /rewind reaches the container's files with the
    same ``podman exec``."""
    url = podman_url(container)
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box_via_daemon(url) as talk:
            [listed] = (await status_json(bridge_env, runtime))["daemon"]["machines"]
            assert (listed["name"], listed["state"]) == ("box", "connected")
            where = f"podman container {container.name}"
            assert (listed["kind"], listed["where"]) == ("podman", where)
            shown = (await status_text(bridge_env, runtime)).splitlines()
            assert shown[1] == f"machines: box ({where}) connected", shown
            await rewinds_a_patch_there(talk, container)
    await ran_there_and_rewound(container)
    assert not (workspace / "who.txt").exists()


async def status_text(env: dict[str, str], runtime: Path) -> str:
    """What ``codex-acp-bridge status`` prints."""
    argv = [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(runtime)]
    done = await trio.run_process(argv, env=env, capture_stdout=True, capture_stderr=True)
    return str(done.stdout.decode())


# -- a container that stops mid-turn ------------------------------------------------------------

#: A command that says it began (a file there), then runs until the container stops.
LONG = "touch started; sleep 30; touch finished"
#: How long a turn whose machine stopped under it may take to end. Codex keeps the command
#: while it tries to resume it on the machine (45 s), but hands the model what it said so
#: far after 10 s (``exec_command``'s wait), and the turn goes on.
TURN_ENDS_SECONDS = 30
#: How long the next prompt may take to fail: one check there (``podman exec``).
FAILS_SECONDS = 10


async def stop_once_started(container: Container) -> None:
    """Until the long command runs in the container (its file is there), then stop the
    container at once (``podman stop -t 0``)."""
    while not await container.exists_inside(f"{THERE}/started"):  # noqa: ASYNC110 (a file there)
        await trio.sleep(0.1)
    await container.stop()


def failed_call(message: dict[str, Any], command: str) -> bool:
    """Whether ``message`` says the tool call running ``command`` failed."""
    update = message.get("params", {}).get("update", {})
    return (
        update.get("sessionUpdate") == "tool_call_update"
        and update.get("status") == "failed"
        and str(update.get("title", "")).startswith(command)
    )


async def stops_mid_turn_and_comes_back(talk: Conversation, container: Container) -> None:
    """``talk``'s session, on machine ``box`` (``container``), runs :data:`LONG` there and
    the container stops under it: the turn ends, the session stays; the next prompt fails at
    once, naming the machine in podman's own words; started again, the container takes the
    next prompt in the same session."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_once_started, container)
        with trio.fail_after(TURN_ENDS_SECONDS):
            ended = await talk.prompt(run(LONG))
    assert ended["stopReason"] == "end_turn", ended
    with trio.fail_after(FAILS_SECONDS), pytest.raises(RpcError) as caught:
        await talk.prompt(run("touch two.txt"))
    message = str(caught.value)
    assert message.startswith(
        f"machine box is not reachable: podman container {container.name}: "
    ), message
    # podman's words for a container that does not run.
    assert "can only create exec sessions on running containers" in message, message
    assert "\n" not in message
    await container.start()
    await talk.said(run("hostname > after.txt"))
    # The command cut short fails once Codex reaches the container again (the exec-server
    # there knows nothing of it): it is not left running in the editor.
    with trio.fail_after(FAILS_SECONDS):
        await talk.client.wait_for(lambda message: failed_call(message, LONG))
    hostname = (await container.exec("hostname")).strip()
    assert (await inside(container, "after.txt", tool_texts(talk))).strip() == hostname
    assert await container.exists_inside(f"{THERE}/started")
    assert not await container.exists_inside(f"{THERE}/finished")
    assert not await container.exists_inside(f"{THERE}/two.txt")


async def test_a_container_stopped_mid_turn_ends_the_turn_fails_the_next_prompt_and_comes_back(
    on_box: OnBox, container: Container, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(podman_url(container)) as talk:
            await stops_mid_turn_and_comes_back(talk, container)
    assert not (workspace / "after.txt").exists()


async def test_through_the_daemon_a_container_stopped_mid_turn_fails_the_next_prompt_and_comes_back(
    on_box_via_daemon: OnBoxViaDaemon, container: Container
) -> None:
    """The daemon's link sees the container stop; the attached editor's next prompt checks
    it with its own ``podman exec``, and status says why the machine is down."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box_via_daemon(podman_url(container)) as talk:
            await stops_mid_turn_and_comes_back(talk, container)


#: Where the bridge puts the Codex it brings into a container (its version after).
BROUGHT = "/tmp/codex-acp-bridge-codex-"


async def brought(container: Container) -> list[str]:
    """The Codex folders the bridge brought into ``container``."""
    found = await container.exec("sh", "-c", f"ls -d {BROUGHT}* 2>/dev/null || true")
    return found.split()


@pytest.fixture
async def bare_container(tmp_path: Path, bridge_env: dict[str, str]) -> AsyncIterator[Container]:
    """A running container with no Codex in it."""
    bridge_env["CONTAINERS_CONF"] = str(containers_conf(tmp_path / "podman"))
    await podman_or_skip(bridge_env)
    async with running_container(bridge_env, codex=False) as found:
        await found.exec("mkdir", "-p", THERE)
        yield found


async def test_a_container_without_codex_is_given_the_bridges_own_once(
    on_box: OnBox,
    bare_container: Container,
    stderr_file: Path,
    workspace: Path,
    bridge_env: dict[str, str],
) -> None:
    container = bare_container
    assert not await container.exists_inside("/opt/codex")
    url = f"podman://{container.name}{THERE}"
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(url) as talk:
            await talk.said(run("hostname > who.txt"))
    hostname = (await container.exec("hostname")).strip()
    shown = (tool_texts(talk), stderr_file.read_text())
    assert (await inside(container, "who.txt", *shown)).strip() == hostname, shown
    assert not (workspace / "who.txt").exists()
    [folder] = await brought(container)
    # The whole vendor folder: the binary and what it brings (its bubblewrap among them).
    assert await container.exists_inside(f"{folder}/bin/codex")
    assert await container.exists_inside(f"{folder}/codex-resources/bwrap")
    log = stderr_file.read_text()
    assert log.count("copying this bridge's") == 1, log
    assert f"copied into podman container {container.name} at {folder}" in log, log
    copied_at = await container.exec("stat", "-c", "%Y", folder)
    # A second connection finds it there: no copy again.
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(url) as talk:
            await talk.said(run("hostname > again.txt"))
    assert (await inside(container, "again.txt")).strip() == hostname, tool_texts(talk)
    log = stderr_file.read_text()
    assert log.count("copying this bridge's") == 1, log
    assert f"brought into podman container {container.name} earlier, at {folder}" in log, log
    assert await container.exec("stat", "-c", "%Y", folder) == copied_at
    assert await brought(container) == [folder]
    # doctor checks the Codex the bridge brought there.
    _code, out = await run_doctor(doctor_env(bridge_env), "--machine", f"box={url}")
    assert line(out, "machine box: Codex").startswith("✓"), out
    assert line(out, "machine box: exec-server").startswith("✓"), out


async def test_a_codex_of_another_version_has_the_bridge_bring_its_own_unless_one_is_named(
    container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``codex`` on the container's ``PATH`` that is not this bridge's version: brought
    over it; the one ``?codex=`` names: used as it is; ``?codex=auto``: the bridge's."""
    await container.exec(
        "sh", "-c", "printf '#!/bin/sh\\necho codex-cli 0.1.0\\n' > /usr/local/bin/codex"
    )
    await container.exec("chmod", "755", "/usr/local/bin/codex")
    assert (await container.exec("codex", "--version")).strip() == "codex-cli 0.1.0"
    where = f"podman://{container.name}{THERE}"
    links = MachineLinks(
        [
            parse_url("named", f"{where}?codex={CODEX_IN}"),
            parse_url("other", where),
            parse_url("auto", f"{where}?codex=auto"),
        ],
        ssh=["ssh"],
        codex_program=str(vendor_folder() / "bin" / "codex"),
        relay=False,
    )
    caplog.set_level("INFO", logger="bridge.shell.codex_there")
    with trio.fail_after(SCENARIO_SECONDS):
        assert await links.check(links.links["named"]) is None
        assert links.in_use(links.links["named"]).codex == CODEX_IN
        assert await brought(container) == []
        assert await links.check(links.links["other"]) is None
        [folder] = await brought(container)
        assert links.in_use(links.links["other"]).codex == f"{folder}/bin/codex"
        assert "its own Codex will not do" in caplog.text and "0.1.0" in caplog.text
        assert await links.check(links.links["auto"]) is None
        assert links.in_use(links.links["auto"]).codex == f"{folder}/bin/codex"
    assert caplog.text.count("copying this bridge's") == 1, caplog.text


async def test_a_codex_built_for_another_architecture_is_refused_not_copied(
    bare_container: Container, tmp_path: Path
) -> None:
    container = bare_container
    folder = tmp_path / "vendor" / "aarch64-unknown-linux-musl"
    (folder / "bin").mkdir(parents=True)
    program = folder / "bin" / "codex"
    program.write_text("#!/bin/sh\necho codex-cli 0.171.0\n")
    program.chmod(0o755)
    links = MachineLinks(
        [parse_url("box", f"podman://{container.name}")],
        ssh=["ssh"],
        codex_program=str(program),
        relay=False,
    )
    with trio.fail_after(SCENARIO_SECONDS):
        why = await links.check(links.links["box"])
    assert why == (
        f"cannot bring Codex into podman container {container.name}: the container is "
        "linux/amd64, this bridge's Codex is built for aarch64-unknown-linux-musl: install "
        "Codex there and name it with ?codex=/path/to/codex"
    )
    assert await brought(container) == []


async def test_a_prompt_waits_until_codexs_connection_is_in_the_container(
    on_box: OnBox,
    bare_container: Container,
    tmp_path: Path,
    stderr_file: Path,
    bridge_env: dict[str, str],
) -> None:
    """Codex connects to the link as soon as the session picks the machine, before the
    bridge has brought its Codex into the container. Codex gives a connection some 10 s
    to answer, and a command sent meanwhile waits on it, then fails ("No usable execution
    environment") and runs nowhere. Here the copy takes 8 s and the exec-server starts 3 s
    late (a loaded machine, a slow runtime): a connection held through the copy would
    answer too late. The link turns Codex away while it copies, and the prompt runs once
    one of Codex's connections is there."""
    container = bare_container
    runtime = shutil.which("podman", path=bridge_env.get("PATH"))
    assert runtime is not None
    slow = tmp_path / "slow-runtime"
    slow.mkdir()
    (slow / "podman").write_text(
        "#!/bin/sh\n"
        "# A copy of 8 s, an exec-server 3 s late; everything else as it is.\n"
        'if [ "$1" = cp ]; then sleep 8; fi\n'
        'case "$*" in *exec-server*) sleep 3 ;; esac\n'
        f'exec {shlex.quote(runtime)} "$@"\n'
    )
    (slow / "podman").chmod(0o755)
    bridge_env["PATH"] = f"{slow}{os.pathsep}{bridge_env.get('PATH', '')}"
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box(f"podman://{container.name}{THERE}") as talk:
            await talk.said(run("hostname > who.txt"))
    hostname = (await container.exec("hostname")).strip()
    shown = (tool_texts(talk), stderr_file.read_text())
    assert (await inside(container, "who.txt", *shown)).strip() == hostname, shown


async def test_through_the_daemon_a_container_without_codex_works_and_rewinds_there(
    on_box_via_daemon: OnBoxViaDaemon, bare_container: Container
) -> None:
    """The daemon's link brings its Codex into the container; the attached editor's
    /rewind reaches the container's files with that same Codex."""
    container = bare_container
    url = f"podman://{container.name}{THERE}"
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box_via_daemon(url) as talk:
            await rewinds_a_patch_there(talk, container)
    await ran_there_and_rewound(container)
    assert len(await brought(container)) == 1


def bridge_links(container: Container) -> MachineLinks:
    """A bridge's check-only link to machine ``box``, the container with no ``?codex=``:
    what it brings there is the pinned Codex's vendor folder."""
    return MachineLinks(
        [parse_url("box", f"podman://{container.name}")],
        ssh=["ssh"],
        codex_program=str(vendor_folder() / "bin" / "codex"),
        relay=False,
    )


async def test_a_copy_cut_short_before_is_named_with_how_to_remove_it(
    bare_container: Container,
) -> None:
    """A folder of the bridge's name there already, not empty, with no working Codex in it
    (an older bridge's copy cut short): the prompt's error says so and how to remove it,
    in one line; the copy made beside it is removed."""
    container = bare_container
    links = bridge_links(container)
    version = (await links.codex.local_version()) or ""
    folder = f"{BROUGHT}{version}"
    await container.exec("mkdir", "-p", f"{folder}/bin")
    with trio.fail_after(SCENARIO_SECONDS):
        why = await links.check(links.links["box"])
    assert why is not None
    assert why.startswith(
        f"cannot bring Codex into podman container {container.name}: the copy at {folder} "
        "does not run there"
    ), why
    assert why.endswith(f"remove it (podman exec {container.name} rm -rf {folder}) and try again")
    assert "\n" not in why
    assert await brought(container) == [folder]


async def test_two_bridges_bringing_codex_at_once_leave_one_working_copy(
    bare_container: Container,
) -> None:
    """The daemon's link and an attached editor's (or two bridges) copying into the same
    container at the same moment: each copies beside and renames, so both find a whole
    Codex there and one folder is left, no half copy and no leftovers."""
    container = bare_container
    bridges = [bridge_links(container) for _ in range(2)]
    answers: list[str | None] = []

    async def check(links: MachineLinks) -> None:
        answers.append(await links.check(links.links["box"]))

    with trio.fail_after(SCENARIO_SECONDS):
        async with trio.open_nursery() as nursery:
            for links in bridges:
                nursery.start_soon(check, links)
    assert answers == [None, None]
    [folder] = await brought(container)
    assert [links.in_use(links.links["box"]).codex for links in bridges] == [
        f"{folder}/bin/codex"
    ] * 2
    assert await container.exec(f"{folder}/bin/codex", "--version")
    # The vendor folder as it is here, once: not a second copy put inside the first.
    inside_folder = (await container.exec("ls", "-A", folder)).split()
    assert sorted(inside_folder) == sorted(p.name for p in vendor_folder().iterdir())
    leftovers = await container.exec("sh", "-c", f"ls -d {folder}.part-* 2>/dev/null || true")
    assert leftovers.split() == []


@pytest.mark.parametrize(
    ("plant", "words"),
    [
        (["chown", "-R", "1234", "{folder}"], "owned by uid 1234, not by root"),
        (["chmod", "777", "{folder}"], "writable by others (mode 777)"),
    ],
)
async def test_a_codex_another_user_left_in_the_containers_tmp_is_not_run(
    bare_container: Container, plant: list[str], words: str
) -> None:
    """The container's /tmp is anyone's to fill first: a working Codex at the bridge's
    folder that another user owns, or that others may write, is refused, saying so and how
    to remove it; nothing of it runs."""
    container = bare_container
    links = bridge_links(container)
    with trio.fail_after(SCENARIO_SECONDS):
        assert await links.check(links.links["box"]) is None  # brought, as the bridge does
        [folder] = await brought(container)
        await container.exec(*(word.format(folder=folder) for word in plant))
        again = bridge_links(container)
        why = await again.check(again.links["box"])
    assert why is not None and words in why, why
    assert f"remove it (podman exec {container.name} rm -rf {folder})" in why, why
    assert again.links["box"].brought is None
