"""A fresh container for each session, end to end: a machines-file entry with ``image =``
(the test image, Debian's podman with runc), the real Codex here, and the bridge making,
reaching and removing each session's container.

What proves where a command ran: its ``hostname`` is its session's container's (each
container has its own), and what it wrote is in the session's folder here only where the
folder is mounted (the default) and only in the container with ``mount = "none"``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.machines import OWNER_LABEL, SANDBOX_LABEL
from bridge.shell.sandboxes import process_owner
from tests.support.containers import IMAGE, containers_conf, podman, podman_or_skip
from tests.support.daemon import StartDaemon
from tests.support.daemon import serve_argv as daemon_serve_argv
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.scenarios.approvals import approving
from tests.test_doctor_machines import doctor_env, line, run_doctor
from tests.test_e2e_machines import adds, run, set_machine, tool_texts

pytestmark = pytest.mark.e2e


def container_of(machine: str, session: str) -> str:
    return f"codex-acp-bridge-{machine}-{session}"


@pytest.fixture
async def sandbox_env(bridge_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``bridge_env`` with podman's settings."""
    bridge_env["CONTAINERS_CONF"] = str(containers_conf(tmp_path / "podman"))
    await podman_or_skip(bridge_env)
    return bridge_env


@dataclass
class Sandbox:
    """The sandbox machine's side of a test: ``env`` (``sandbox_env``), and the containers
    its sessions made (``made``: the test notes each name as it learns it)."""

    env: dict[str, str]
    made: list[str]
    bridge_argv: list[str]
    open_conversation: OpenConversation

    def open(self, **options: Any) -> AbstractAsyncContextManager[Conversation]:
        """A conversation with a bridge of its own (no daemon), every permission allowed."""
        argv = [*self.bridge_argv, "--no-daemon"]
        return self.open_conversation(argv=argv, env=self.env, on_request=approving([]), **options)

    async def use(self, talk: Conversation) -> str:
        """``talk``'s session moved to the sandbox machine; the name of its container, noted
        to be removed."""
        name = container_of("sandbox", talk.sid)
        self.made.append(name)
        await set_machine(talk, "sandbox")
        return name


@pytest.fixture
async def sandbox(
    sandbox_env: dict[str, str], bridge_argv: list[str], open_conversation: OpenConversation
) -> AsyncIterator[Sandbox]:
    """The test's :class:`Sandbox`: the containers its sessions made are removed at the
    end, whatever happened."""
    found = Sandbox(sandbox_env, [], bridge_argv, open_conversation)
    try:
        yield found
    finally:
        with trio.CancelScope(shield=True):
            for name in found.made:
                await podman(sandbox_env, "rm", "-f", "--time", "0", name, check=False)


async def exists(env: dict[str, str], name: str) -> bool:
    done = await podman(env, "ps", "-a", "--quiet", "--filter", f"name=^{name}$")
    return bool(done.strip())


async def new_session(talk: Conversation, cwd: Path) -> Conversation:
    """Another session on the same bridge and client."""
    opened = await talk.client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return replace(talk, sid=opened["sessionId"], opened=opened)


def machines_file(env: dict[str, str], **more: str) -> None:
    extra = "".join(f"{key} = {value}\n" for key, value in more.items())
    Path(env["CODEX_ACP_BRIDGE_MACHINES"]).write_text(
        f'[sandbox]\nimage = "{IMAGE}"\nruntime = "podman"\n{extra}'
    )


async def test_each_session_gets_a_container_of_its_own_gone_when_the_session_is(
    sandbox: Sandbox, workspace: Path, tmp_path: Path, stderr_file: Path
) -> None:
    """Two sessions on the sandbox machine: two containers, named after their sessions,
    each running its own session's command in that session's folder (mounted at its own
    path); closing a session removes its container, and the bridge's end the rest."""
    env = sandbox.env
    machines_file(env)
    second = tmp_path / "second"
    second.mkdir()
    with trio.fail_after(SCENARIO_SECONDS):
        async with sandbox.open() as talk:
            other = await new_session(talk, second)
            names = []
            for session in (talk, other):
                names.append(await sandbox.use(session))
                await session.said(run("hostname > who.txt; pwd >> who.txt"))
            shown = (tool_texts(talk), stderr_file.read_text())
            hostnames = [(await podman(env, "exec", n, "hostname")).strip() for n in names]
            assert len(set(hostnames)) == 2 and socket.gethostname() not in hostnames
            assert (workspace / "who.txt").read_text().split() == [
                hostnames[0],
                str(workspace),
            ], shown
            assert (second / "who.txt").read_text().split() == [hostnames[1], str(second)]
            labels = await podman(
                env,
                "inspect",
                "--format",
                f'{{{{index .Config.Labels "{SANDBOX_LABEL}"}}}}',
                *names,
            )
            assert labels.split() == ["sandbox", "sandbox"]
            # The second session closed: its container goes, the first stays.
            await talk.client.request("session/close", {"sessionId": other.sid})
            with trio.fail_after(SCENARIO_SECONDS / 4):
                while await exists(env, names[1]):  # noqa: ASYNC110 (podman tells no event)
                    await trio.sleep(0.2)
            assert await exists(env, names[0])
            await talk.said(run("hostname > again.txt"))
            assert (workspace / "again.txt").read_text().strip() == hostnames[0]
    # The bridge ended: its sessions' containers with it.
    assert not await exists(env, names[0]), stderr_file.read_text()


async def test_a_sandbox_without_mounts_or_network_keeps_its_work_inside(
    sandbox: Sandbox, workspace: Path
) -> None:
    """``mount = "none"``, ``network = "none"``: the session's folder is made empty in its
    container, what a command writes stays there, and the container has no network but
    loopback."""
    env = sandbox.env
    machines_file(env, mount='"none"', network='"none"')
    with trio.fail_after(SCENARIO_SECONDS):
        async with sandbox.open() as talk:
            name = await sandbox.use(talk)
            await talk.said(run("ls /sys/class/net > nets.txt"))
            await talk.said(adds("note.txt", "written in the box"))
            inside = await podman(env, "exec", name, "cat", f"{workspace}/nets.txt")
            assert inside.split() == ["lo"], tool_texts(talk)
            note = await podman(env, "exec", name, "cat", f"{workspace}/note.txt")
            assert note == "written in the box\n", tool_texts(talk)
            assert not (workspace / "nets.txt").exists()
            assert not (workspace / "note.txt").exists()


async def test_a_container_a_crashed_bridge_left_is_removed_at_the_next_start(
    sandbox: Sandbox,
) -> None:
    """A session's container whose bridge is gone (its owner label names no running
    process) is removed when a bridge with a sandbox machine starts; one whose bridge
    runs (this test's own process, say) is left alone."""
    env = sandbox.env
    machines_file(env)

    mark = uuid.uuid4().hex[:8]
    left, kept = (f"codex-acp-bridge-sandbox-{mark}-{what}" for what in ("left", "kept"))
    sandbox.made += [left, kept]
    for name, owner in ((left, "999999999:1"), (kept, process_owner())):
        await podman(
            env,
            "run",
            "-d",
            "--name",
            name,
            "--label",
            f"{SANDBOX_LABEL}=sandbox",
            "--label",
            f"{OWNER_LABEL}={owner}",
            IMAGE,
            "sleep",
            "infinity",
        )
    assert os.getpid() == int(process_owner().split(":")[0])
    with trio.fail_after(SCENARIO_SECONDS):
        async with sandbox.open():
            while await exists(env, left):  # noqa: ASYNC110 (podman tells no event)
                await trio.sleep(0.2)
    assert await exists(env, kept)


async def test_a_session_loaded_again_is_told_and_given_a_fresh_container(
    sandbox: Sandbox, workspace: Path
) -> None:
    """Closed, its container goes with what it held outside the session's folders; loaded
    later (by the next bridge), the session says so, and its next prompt runs in a new
    container of the same name."""
    env = sandbox.env
    machines_file(env)
    with trio.fail_after(SCENARIO_SECONDS):
        async with sandbox.open() as talk:
            name = await sandbox.use(talk)
            await talk.said(run("touch /root/was-here; hostname > first.txt"))
            assert await podman(env, "exec", name, "ls", "/root/was-here")
            session = talk.sid
    assert not await exists(env, name)
    with trio.fail_after(SCENARIO_SECONDS):
        async with sandbox.open(session=False) as talk:
            await talk.client.request(
                "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
            )
            talk = replace(talk, sid=session)
            assert "the container it had is gone" in talk.text(), talk.text()
            await talk.said(run("hostname > second.txt; ls /root > root.txt"))
            assert await exists(env, name)
    first, second = ((workspace / f).read_text().strip() for f in ("first.txt", "second.txt"))
    assert first != second
    assert (workspace / "root.txt").read_text().split() == []


async def test_doctor_makes_a_container_of_the_image_checks_it_and_removes_it(
    sandbox: Sandbox,
) -> None:
    """``doctor`` checks a sandbox machine as its sessions would use it: a container of the
    image with this bridge's Codex, its exec-server's handshake; then removes it. An image
    that is not there is named in the runtime's words."""
    env = doctor_env(sandbox.env)
    machines_file(env)
    _code, out = await run_doctor(env)
    assert line(out, "machine sandbox: Codex").startswith("✓"), out
    assert line(out, "machine sandbox: exec-server").startswith("✓"), out
    left = await podman(env, "ps", "-a", "--quiet", "--filter", "name=codex-acp-bridge-doctor-")
    assert left.split() == []
    Path(env["CODEX_ACP_BRIDGE_MACHINES"]).write_text(
        '[sandbox]\nimage = "localhost/no-such-image:1"\nruntime = "podman"\n'
    )
    _code, out = await run_doctor(env)
    reached = line(out, "machine sandbox: reachable")
    assert reached.startswith("✗") and "podman run" in reached, out
    assert "no-such-image" in reached, out


async def test_through_the_daemon_the_editors_bridge_makes_and_removes_the_container(
    start_daemon: StartDaemon,
    open_conversation: OpenConversation,
    runtime: Path,
    sandbox: Sandbox,
    workspace: Path,
    stderr_file: Path,
) -> None:
    """An editor attached to the daemon offers the sandbox machine of the machines file
    both read: its own bridge makes the session's container and registers it with the
    daemon's Codex, which runs the turn; the container goes when that bridge does."""
    env = sandbox.env
    machines_file(env)
    async with start_daemon("--no-page"):
        with trio.fail_after(SCENARIO_SECONDS):
            async with open_conversation(
                argv=daemon_serve_argv(runtime), env=env, on_request=approving([])
            ) as talk:
                name = await sandbox.use(talk)
                await talk.said(run("hostname > who.txt"))
                hostname = (await podman(env, "exec", name, "hostname")).strip()
                shown = (tool_texts(talk), stderr_file.read_text())
                assert (workspace / "who.txt").read_text().strip() == hostname, shown
        assert not await exists(env, name)
