"""A folder's dev container as a machine, end to end: the real devcontainers CLI (pinned in
``tools/node``) bringing up a ``devcontainer.json`` of the test's own with Debian's podman
(``?runtime=podman``), the real Codex here, and the bridge's link reaching the container
the CLI made.

The dev container mounts the folder at its workspace folder (``/workspaces/NAME``), as the
CLI does, so what a command writes there shows in the folder here too: what proves where
it ran is what it saw there (the container's hostname, its working folder), and that the
container has no Codex of its own (the bridge brings its own, as for any container).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from bridge.jsonrpc import RpcError
from tests.support.containers import IMAGE, containers_conf, podman, podman_or_skip
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.scenarios.approvals import approving
from tests.test_doctor_machines import doctor_env, line, run_doctor
from tests.test_e2e_containers import (  # noqa: F401 (fixtures)
    BROUGHT,
    OnBoxViaDaemon,
    on_box_via_daemon,
    open_attached,
)
from tests.test_e2e_machines import adds, run, set_machine, tool_texts

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
#: The pinned devcontainers CLI (scripts/setup installs it with the pinned Codex).
CLI_BIN = ROOT / "tools" / "node" / "node_modules" / ".bin"


@pytest.fixture
async def devcontainer_folder(tmp_path: Path, bridge_env: dict[str, str]) -> AsyncIterator[Path]:
    """A folder with a ``devcontainer.json`` (comments and a trailing comma, as people
    write them) naming the test image; its dev container removed at the end."""
    if not (CLI_BIN / "devcontainer").exists():
        pytest.fail(f"no devcontainers CLI in {CLI_BIN}: run scripts/setup")
    bridge_env["CONTAINERS_CONF"] = str(containers_conf(tmp_path / "podman"))
    bridge_env["PATH"] = f"{CLI_BIN}{os.pathsep}{bridge_env.get('PATH', '')}"
    await podman_or_skip(bridge_env)
    folder = tmp_path / "app"
    (folder / ".devcontainer").mkdir(parents=True)
    (folder / ".devcontainer" / "devcontainer.json").write_text(
        "{\n"
        "  // The image the tests build from Debian's archive (no registry here).\n"
        f'  "image": "{IMAGE}",\n'
        "}\n"
    )
    try:
        yield folder
    finally:
        with trio.CancelScope(shield=True):
            made = await podman(
                bridge_env, "ps", "-aq", "--filter", f"label=devcontainer.local_folder={folder}"
            )
            for container in made.split():
                await podman(bridge_env, "rm", "-f", "--time", "0", container, check=False)


async def dev_container(env: dict[str, str], folder: Path) -> str:
    """The ID of the dev container the CLI made for ``folder``."""
    [found] = (
        await podman(env, "ps", "-q", "--filter", f"label=devcontainer.local_folder={folder}")
    ).split()
    return found


async def test_a_session_works_in_the_folders_dev_container(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    devcontainer_folder: Path,
    stderr_file: Path,
) -> None:
    """``devcontainer:///FOLDER?runtime=podman``: the bridge brings the dev container up
    at the first prompt there, brings its Codex in, and the session's command runs in the
    container, in its workspace folder; a second bridge finds it up and uses it."""
    folder = devcontainer_folder
    url = f"box=devcontainer://{folder}?runtime=podman"
    argv = [*bridge_argv, "--no-daemon", "--machine", url]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=argv, env=bridge_env, on_request=approving([])) as talk:
            await set_machine(talk, "box")
            await talk.said(run("hostname > who.txt; pwd >> who.txt; ls /opt >> who.txt"))
            await talk.said(adds("note.txt", "patched in the dev container"))
    shown = (tool_texts(talk), stderr_file.read_text())
    container = await dev_container(bridge_env, folder)
    hostname = (await podman(bridge_env, "exec", container, "hostname")).strip()
    assert hostname != socket.gethostname()
    # Written in the container's workspace folder, which is this folder mounted there.
    assert (folder / "who.txt").exists(), shown
    assert (folder / "who.txt").read_text().split() == [hostname, "/workspaces/app"], shown
    note = await podman(bridge_env, "exec", container, "cat", "/workspaces/app/note.txt")
    assert note == "patched in the dev container\n", shown
    brought = await podman(bridge_env, "exec", container, "sh", "-c", f"ls -d {BROUGHT}*")
    assert len(brought.split()) == 1
    assert "the dev container of" in stderr_file.read_text()
    # The next bridge: the same container, up already, and its Codex there.
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=argv, env=bridge_env, on_request=approving([])) as talk:
            await set_machine(talk, "box")
            await talk.said(run("hostname > again.txt"))
    assert (folder / "again.txt").read_text().strip() == hostname, tool_texts(talk)
    assert await dev_container(bridge_env, folder) == container
    # doctor finds it up, by the CLI's label, and reaches its Codex.
    _code, out = await run_doctor(doctor_env(bridge_env), "--machine", url)
    assert line(out, "machine box: Codex").startswith("✓"), out


async def test_a_dev_container_that_does_not_come_up_fails_the_prompt_in_the_clis_words(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    devcontainer_folder: Path,
) -> None:
    """A ``devcontainer.json`` whose container cannot start (a ``runArgs`` the runtime
    refuses): the prompt on that machine fails at once, naming the folder and what the
    CLI said; the session stays."""
    folder = devcontainer_folder
    config = folder / ".devcontainer" / "devcontainer.json"
    config.write_text(json.dumps({"image": IMAGE, "runArgs": ["--no-such-flag"]}))
    url = f"box=devcontainer://{folder}?runtime=podman"
    argv = [*bridge_argv, "--no-daemon", "--machine", url]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=argv, env=bridge_env, on_request=approving([])) as talk:
            await set_machine(talk, "box")
            with pytest.raises(RpcError) as caught:
                await talk.prompt(run("hostname > who.txt"))
            said = str(caught.value)
            assert "machine box is not reachable" in said, said
            assert f"devcontainer up for {folder} failed" in said, said
            assert "podman run" in said and "--no-such-flag" in said, said
            # The session stays: back to this machine, it works.
            await set_machine(talk, "local")
            await talk.said(run("true"))
    assert not (folder / "who.txt").exists()


async def test_through_the_daemon_the_dev_container_is_brought_up_once_and_rewinds_there(
    on_box_via_daemon: OnBoxViaDaemon,  # noqa: F811 (the fixture imported above)
    bridge_env: dict[str, str],
    devcontainer_folder: Path,
) -> None:
    """The daemon's link brings the dev container up and its Codex in; the attached
    editor's command runs in the container, and its /rewind undoes the file there."""
    folder = devcontainer_folder
    url = f"devcontainer://{folder}?runtime=podman"
    # In the machines file both read: an attached editor runs the CLI for a dev container
    # only as its own configuration names it, never from what the daemon publishes.
    Path(bridge_env["CODEX_ACP_BRIDGE_MACHINES"]).write_text(f'[box]\nurl = "{url}"\n')
    with trio.fail_after(SCENARIO_SECONDS):
        async with on_box_via_daemon(url) as talk:
            await talk.said(adds("a.txt", "one"))
            assert (folder / "a.txt").read_text() == "one\n", tool_texts(talk)
            answer = await talk.said("/rewind")
            assert "**Rewound 1 prompt.**" in answer, answer
    container = await dev_container(bridge_env, folder)
    hostname = (await podman(bridge_env, "exec", container, "hostname")).strip()
    assert (folder / "who.txt").read_text().strip() == hostname
    assert not (folder / "a.txt").exists()
