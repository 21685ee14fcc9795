"""Sessions on another machine, end to end: the real Codex, a real OpenSSH server on loopback
(``tests/support/sshd.py``: its own host key and config, a dedicated unprivileged user whose
home holds the remote workspace), and the bridge's link over the user's own ``ssh``.

What proves where a command ran: ``id -un`` says the machine's user, and its files are in the
machine's workspace, not in the session's folder here.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.daemon.runtime import read_info
from bridge.jsonrpc import RpcError
from tests.support.browser import chromium_or_skip, headless_chromium
from tests.support.daemon import StartDaemon
from tests.support.daemon import serve_argv as daemon_serve_argv
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.reading import Ended
from tests.support.scenarios.approvals import approving
from tests.support.scenarios.subagents import SUBAGENTS, children, script, spawn, states, wait
from tests.support.sshd import SshMachine, ssh_machine
from tests.test_e2e_daemon import status_json

pytestmark = pytest.mark.e2e

REMOTE_USER = "cab-remote"


def run(cmd: str) -> str:
    """A command Codex runs with approval (outside the sandbox), then ``done``."""
    args = {"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "test"}
    return f"@@ call exec_command {json.dumps(args)}\n@@ then\n@@ say done"


@pytest.fixture
async def machine(tmp_path: Path, codex_bin: str) -> AsyncIterator[SshMachine]:
    async with ssh_machine(tmp_path / "sshd", codex_bin) as found:
        yield found


def serve_argv(bridge_argv: list[str], *machines: str, ssh_command: str) -> list[str]:
    argv = [*bridge_argv, "--no-daemon", "--ssh-command", ssh_command]
    for each in machines:
        argv += ["--machine", each]
    return argv


def attached_argv(runtime: Path, machine: SshMachine) -> list[str]:
    """An editor's ``serve`` on the daemon of ``runtime``, given the user's ssh command as
    the daemon is: an attached serve checks machines and reads their files with its own,
    never with the one ``daemon.json`` names."""
    return [*daemon_serve_argv(runtime), "--ssh-command", machine.ssh_command]


def box_machine(machine: SshMachine) -> str:
    """The machine ``box``: the test's sshd, its workspace as the machine's folder."""
    return f"box={machine.url}{machine.workspace}"


def daemon_options(machine: SshMachine, *more: str) -> tuple[str, ...]:
    """A daemon's options for the machine ``box``, reached with the user's ssh command."""
    return ("--machine", box_machine(machine), "--ssh-command", machine.ssh_command, *more)


OpenOn = Callable[..., AbstractAsyncContextManager[Conversation]]
OpenAttached = Callable[[], AbstractAsyncContextManager[Conversation]]


@pytest.fixture
def open_attached(
    open_conversation: OpenConversation,
    machine: SshMachine,
    runtime: Path,
    bridge_env: dict[str, str],
) -> OpenAttached:
    """``open_attached()``: a conversation of an editor attached to the test's daemon,
    allowing every permission request."""

    def start() -> AbstractAsyncContextManager[Conversation]:
        argv = attached_argv(runtime, machine)
        return open_conversation(argv=argv, env=bridge_env, on_request=approving([]))

    return start


@pytest.fixture
def open_on(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    machine: SshMachine,
) -> OpenOn:
    """``open_on(*extra_machines, asked=[...], ssh_command=...)``: a conversation whose
    bridge has the machine ``box`` (the test's sshd, its workspace as the machine's folder)."""

    def start(
        *extra: str,
        asked: list[dict[str, Any]] | None = None,
        ssh_command: str | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[Conversation]:
        argv = serve_argv(
            bridge_argv,
            box_machine(machine),
            *extra,
            ssh_command=ssh_command or machine.ssh_command,
        )
        return open_conversation(
            argv=argv,
            env=bridge_env,
            on_request=approving([] if asked is None else asked),
            capabilities=capabilities,
            # Sub-agents are the RFD's, in the unstable schema.
            unstable=capabilities is not None and "subagents" in capabilities,
        )

    return start


async def set_machine(talk: Conversation, value: str) -> dict[str, Any]:
    answer: dict[str, Any] = await talk.client.request(
        "session/set_config_option",
        {"sessionId": talk.sid, "configId": "machine", "value": value},
    )
    return answer


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == option_id)


def tool_titles(talk: Conversation) -> list[str]:
    return [
        m["params"]["update"]["title"]
        for m in talk.client.received
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "tool_call"
    ]


def tool_texts(talk: Conversation) -> str:
    """Every text a tool call of the session showed, joined."""
    texts = []
    for m in talk.client.received:
        if m.get("method") != "session/update":
            continue
        content = m["params"]["update"].get("content")
        for block in content if isinstance(content, list) else []:
            inner = block.get("content") if block.get("type") == "content" else None
            if isinstance(inner, dict) and inner.get("type") == "text":
                texts.append(inner["text"])
    return "\n".join(texts)


async def test_a_session_on_a_machine_runs_commands_and_edits_there_with_approval_here(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    asked: list[dict[str, Any]] = []
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on(asked=asked) as talk:
            machines = option(talk.opened["configOptions"], "machine")
            assert machines["currentValue"] == "local"
            assert [v["value"] for v in machines["options"]] == ["local", "box"]
            picked = await set_machine(talk, "box")
            assert option(picked["configOptions"], "machine")["currentValue"] == "box"

            await talk.said(run("id -un > who.txt; pwd >> who.txt"))
            patch = (
                '@@ call exec_command {"cmd":"apply_patch <<\'EOF\'\\n*** Begin Patch\\n'
                '*** Add File: note.txt\\n+written on the machine\\n*** End Patch\\nEOF\\n"}'
                "\n@@ then\n@@ say done"
            )
            await talk.said(patch)

    who = (machine.workspace / "who.txt").read_text().split()
    assert who == [REMOTE_USER, str(machine.workspace)]
    assert (machine.workspace / "note.txt").read_text() == "written on the machine\n"
    assert (machine.workspace / "note.txt").stat().st_uid == machine.uid
    assert not (workspace / "who.txt").exists() and not (workspace / "note.txt").exists()
    # The approval came to the editor, and the tool calls say where they ran.
    assert any("who.txt" in json.dumps(p) for p in asked)
    assert any(title.endswith("(on box)") for title in tool_titles(talk))


async def test_the_machine_switches_between_turns(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            await talk.said(run("echo local >> where.txt"))
            await set_machine(talk, "box")
            await talk.said(run("echo box >> where.txt"))
            await set_machine(talk, "local")
            await talk.said(run("echo local-again >> where.txt"))
    assert (workspace / "where.txt").read_text() == "local\nlocal-again\n"
    assert (machine.workspace / "where.txt").read_text() == "box\n"


async def test_a_wrong_host_key_is_an_error_in_ssh_s_words_and_the_session_stays(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on(ssh_command=machine.wrong_host_key_command) as talk:
            await set_machine(talk, "box")
            with pytest.raises(RpcError) as caught:
                await talk.prompt(run("touch nope.txt"))
            message = str(caught.value)
            assert "machine box is not reachable" in message
            assert "Host key verification failed" in message
            # The session stays, and works here.
            await set_machine(talk, "local")
            await talk.said(run("touch here.txt"))
    assert (workspace / "here.txt").exists()
    assert not (machine.workspace / "nope.txt").exists()


async def test_a_machine_without_codex_says_so(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    tmp_path: Path,
    codex_bin: str,
) -> None:
    async with ssh_machine(tmp_path / "bare", codex_bin, with_codex=False) as bare:
        argv = serve_argv(bridge_argv, f"bare={bare.url}", ssh_command=bare.ssh_command)
        with trio.fail_after(SCENARIO_SECONDS):
            async with open_conversation(argv=argv, env=bridge_env) as talk:
                await set_machine(talk, "bare")
                with pytest.raises(RpcError) as caught:
                    await talk.prompt(run("true"))
    assert "no Codex on" in str(caught.value) and "?codex=" in str(caught.value)


async def test_codex_auto_brings_this_bridges_codex_to_the_users_cache_folder_there_once(
    open_conversation: OpenConversation,
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    tmp_path: Path,
    codex_bin: str,
    stderr_file: Path,
) -> None:
    """``ssh://HOST?codex=auto`` on a machine with no Codex: the bridge copies its Codex's
    whole vendor folder through ssh into ``$XDG_CACHE_HOME/codex-acp-bridge/codex-VERSION``
    there and runs the command with it; the next bridge finds it there and copies nothing."""
    async with ssh_machine(tmp_path / "bare", codex_bin, with_codex=False) as bare:
        url = f"bare={bare.url}{bare.workspace}?codex=auto"
        argv = serve_argv(bridge_argv, url, ssh_command=bare.ssh_command)
        for round_ in (1, 2):
            with trio.fail_after(SCENARIO_SECONDS):
                async with open_conversation(
                    argv=argv, env=bridge_env, on_request=approving([])
                ) as talk:
                    await set_machine(talk, "bare")
                    await talk.said(run(f"id -un > round{round_}.txt"))
            said = (bare.workspace / f"round{round_}.txt").read_text().strip()
            assert said == bare.user, (tool_texts(talk), stderr_file.read_text())
        found = bare.run('ls -d "$XDG_CACHE_HOME"/codex-acp-bridge/*')
        [folder] = found.stdout.split()
        assert folder.endswith("/codex-acp-bridge/codex-0.171.0"), found
        assert bare.run(f"test -x {folder}/bin/codex && test -x {folder}/codex-resources/bwrap")
        log = stderr_file.read_text()
        assert log.count("copying this bridge's") == 1, log
        assert "brought into" in log and "earlier" in log, log
        assert bare.run(f"ls -d {folder}.part-* 2>/dev/null").stdout == ""


async def test_an_exec_server_killed_mid_command_fails_that_call_and_the_next_prompt_works(
    open_on: OpenOn, machine: SshMachine
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            await set_machine(talk, "box")
            await talk.said(run("true"))  # the link is up

            async def kill_when_running() -> None:
                started = machine.workspace / "started"
                while not started.exists():  # noqa: ASYNC110 (a file on the machine: poll)
                    await trio.sleep(0.05)
                # This machine's only: a pattern for the user would kill those of every
                # test running meanwhile (they log in as the same user), mid-command too.
                assert machine.kill_exec_servers()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_when_running)
                with trio.fail_after(20):
                    ended = await talk.prompt(run("touch started; sleep 30; touch finished"))
            assert ended["stopReason"] == "end_turn"
            assert "The link to machine box was lost" in tool_texts(talk)
            # Codex connects again; the link comes back.
            await talk.said(run("touch after.txt"))
    assert not (machine.workspace / "finished").exists()
    assert (machine.workspace / "after.txt").exists()


async def test_an_sshd_stopped_is_an_error_and_once_started_again_the_session_works(
    open_on: OpenOn, machine: SshMachine, stderr_file: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            await set_machine(talk, "box")
            await talk.said(run("touch one.txt"))
            await machine.stop(kill_sessions=True)
            # The bridge learns of the drop as its ssh ends; a prompt in that instant still
            # finds the link connected (its commands then fail in Codex).
            while "machine box is down" not in stderr_file.read_text():  # noqa: ASYNC110
                await trio.sleep(0.05)
            with pytest.raises(RpcError) as caught:
                await talk.prompt(run("touch two.txt"))
            assert "machine box is not reachable" in str(caught.value)
            await machine.start()
            await talk.said(run("touch three.txt"))
    assert (machine.workspace / "one.txt").exists()
    assert not (machine.workspace / "two.txt").exists()
    assert (machine.workspace / "three.txt").exists()


async def test_sub_agents_of_a_session_on_a_machine_work_there(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    child = run("id -un > child.txt")
    # The child's first command opens its own link (ssh, then exec-server): on a loaded
    # machine that outlasts a short wait, and the parent would end before the child does.
    parent = script(spawn(child), wait(timeout_ms=60_000), "@@ say the child is done")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on(capabilities=SUBAGENTS) as talk:
            await set_machine(talk, "box")
            await talk.said(parent)
            [kid] = children(talk.client)
            await talk.client.wait_for(
                lambda _m: (
                    states(talk.client, kid)[-1:]
                    == [Ended({"state": "idle", "stopReason": "end_turn"})]
                )
            )
    assert any(title.endswith("(on box)") for title in tool_titles(talk)), tool_titles(talk)
    assert (machine.workspace / "child.txt").read_text().strip() == REMOTE_USER
    assert not (workspace / "child.txt").exists()


async def test_a_session_keeps_its_machine_when_loaded_by_a_new_bridge(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            await set_machine(talk, "box")
            await talk.said(run("touch first.txt"))
        async with open_on() as again:
            loaded = await again.client.request(
                "session/load",
                {"sessionId": talk.sid, "cwd": str(workspace), "mcpServers": []},
            )
            assert option(loaded["configOptions"], "machine")["currentValue"] == "box"
            again.sid = talk.sid
            await again.said(run("touch second.txt"))
    assert (machine.workspace / "second.txt").exists()


async def box_is_down(env: dict[str, str], runtime: Path) -> bool:
    """What ``status --json`` says of machine ``box``'s link."""
    [box] = (await status_json(env, runtime))["daemon"]["machines"]
    return bool(box["state"] == "down")


async def test_through_the_daemon_a_session_works_on_its_machine_and_status_shows_where(
    start_daemon: StartDaemon,
    open_attached: OpenAttached,
    machine: SshMachine,
    runtime: Path,
    bridge_env: dict[str, str],
    workspace: Path,
) -> None:
    """The daemon runs the link and registers it with its Codex; an editor attached to it
    is offered the machine, and its session's commands run there."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon(*daemon_options(machine, "--no-page")) as (_, info):
            assert [(m.name, m.url, m.path) for m in info.machines] == [
                ("box", f"{machine.url}{machine.workspace}", str(machine.workspace))
            ]
            async with open_attached() as talk:
                machines = option(talk.opened["configOptions"], "machine")
                assert [v["value"] for v in machines["options"]] == ["local", "box"]
                await set_machine(talk, "box")
                await talk.said(run("id -un > who.txt"))
                assert any(title.endswith("(on box)") for title in tool_titles(talk))
                shown = await status_json(bridge_env, runtime)
                [listed] = shown["daemon"]["machines"]
                assert (listed["name"], listed["state"]) == ("box", "connected")
                assert (listed["kind"], listed["where"]) == ("ssh", machine.host)
                # The link's token is Codex's alone: not in what the daemon publishes.
                assert set(listed) <= {
                    "name",
                    "url",
                    "kind",
                    "where",
                    "description",
                    "path",
                    "state",
                    "reason",
                }
                [line] = [t for t in shown["threads"] if t["threadId"] == talk.sid]
                assert line["machine"] == "box"
                # The link is the daemon's: this bridge hears of a drop from Codex, and
                # checks the machine before the next prompt there.
                await machine.stop(kill_sessions=True)
                while not await box_is_down(bridge_env, runtime):  # noqa: ASYNC110 (a file)
                    await trio.sleep(0.1)
                with pytest.raises(RpcError) as caught:
                    await talk.prompt(run("touch two.txt"))
                assert "machine box is not reachable" in str(caught.value)
                await machine.start()
                await talk.said(run("touch three.txt"))
    assert (machine.workspace / "who.txt").read_text().strip() == REMOTE_USER
    assert not (workspace / "who.txt").exists()
    assert not (machine.workspace / "two.txt").exists()
    assert (machine.workspace / "three.txt").exists()


async def codex_tried(stderr_file: Path, times: int = 1) -> None:
    """Until Codex's connections to the machine failed ``times`` times, as the link logged."""
    while stderr_file.read_text().count("machine box is down") < times:  # noqa: ASYNC110
        await trio.sleep(0.05)


async def test_a_machine_away_when_codex_first_tried_it_takes_the_first_prompt_once_back(
    open_on: OpenOn, machine: SshMachine, stderr_file: Path
) -> None:
    """Codex connects to a machine once it is registered; when that fails, it waits a
    moment before it tries again, and a command meanwhile fails at once, told only to the
    model. The first prompt after the machine is back waits for Codex's link: its file lands."""
    await machine.stop()
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            await codex_tried(stderr_file)
            await machine.start()
            await set_machine(talk, "box")
            await talk.said(adds("a.txt", "one"))
    assert (machine.workspace / "a.txt").read_text() == "one\n", tool_texts(talk)


async def test_through_the_daemon_a_machine_away_at_its_start_takes_the_first_prompt_once_back(
    start_daemon: StartDaemon, open_attached: OpenAttached, machine: SshMachine, runtime: Path
) -> None:
    """The same through the daemon: its link failed Codex's first connection; the machine
    is back, this bridge's own ssh reaches it, and its prompt waits for Codex's link too."""
    await machine.stop()
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon(*daemon_options(machine, "--no-page")), open_attached() as talk:
            await set_machine(talk, "box")
            while read_info(runtime).machines[0].state != "down":  # noqa: ASYNC110 (a file)
                await trio.sleep(0.05)
            await machine.start()
            await talk.said(adds("a.txt", "one"))
    assert (machine.workspace / "a.txt").read_text() == "one\n", tool_texts(talk)


async def test_two_machines_and_local_at_once_each_sessions_sub_agent_works_where_it_does(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    """Three sessions of one bridge at once: on ``box``, on ``gpu`` (a second machine: the
    same sshd, another folder, its own link) and here; each spawns a sub-agent that writes
    who it is and where, in its own session's place."""
    gpu_folder = machine.workspace.parent / f"{machine.workspace.name}-gpu"
    assert machine.run(f"mkdir -p {gpu_folder}").returncode == 0
    gpu_workspace = Path(gpu_folder)
    child = run("id -un > child.txt; pwd >> child.txt")
    parent = script(spawn(child), wait(timeout_ms=60_000), "@@ say the child is done")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on(f"gpu={machine.url}{gpu_folder}", capabilities=SUBAGENTS) as talk:
            client = talk.client
            sessions = {"box": talk.sid}
            for name in ("gpu", "local"):
                sessions[name] = await client.new_session(str(workspace))
            for name in ("box", "gpu"):
                await client.request(
                    "session/set_config_option",
                    {"sessionId": sessions[name], "configId": "machine", "value": name},
                )
            ended: dict[str, Any] = {}

            async def prompt(name: str) -> None:
                ended[name] = await client.prompt(sessions[name], parent)

            async with trio.open_nursery() as nursery:
                for name in sessions:
                    nursery.start_soon(prompt, name)
            assert ended == {name: Ended({"stopReason": "end_turn"}) for name in sessions}
            kids = children(client)
            assert len(kids) == 3
            for kid in kids:
                await client.wait_for(
                    lambda _m, kid=kid: (
                        states(client, kid)[-1:]
                        == [Ended({"state": "idle", "stopReason": "end_turn"})]
                    )
                )
    assert (machine.workspace / "child.txt").read_text().split() == [
        REMOTE_USER,
        str(machine.workspace),
    ]
    assert (gpu_workspace / "child.txt").read_text().split() == [REMOTE_USER, str(gpu_folder)]
    local_user = pwd.getpwuid(os.getuid()).pw_name
    assert (workspace / "child.txt").read_text().split() == [local_user, str(workspace)]


async def test_the_page_groups_threads_by_machine_with_each_links_state(
    start_daemon: StartDaemon,
    open_attached: OpenAttached,
    machine: SshMachine,
    runtime: Path,
    bridge_env: dict[str, str],
    tmp_path: Path,
) -> None:
    chromium = await chromium_or_skip()
    with trio.fail_after(SCENARIO_SECONDS):
        async with (
            start_daemon(*daemon_options(machine)),
            headless_chromium(chromium, tmp_path / "profile", tmp_path / "chromium.log") as page,
            open_attached() as here,
            open_attached() as there,
        ):
            await set_machine(there, "box")
            await there.said(run("true"))
            await here.said("@@ say hello")
            address = await trio.run_process(
                [sys.executable, "-m", "bridge", "status", "--url", "--runtime-dir", str(runtime)],
                env=bridge_env,
                capture_stdout=True,
            )
            await page.goto(address.stdout.decode().strip())
            group = "document.querySelector('[data-machine=\"{}\"]')"
            in_group = group + "?.querySelector('[data-thread-id=\"{}\"]')"
            await page.wait_for(in_group.format("box", there.sid))
            await page.wait_for(in_group.format("local", here.sid))
            assert await page.evaluate(group.format("box") + ".dataset.state") == "connected"
            assert not await page.evaluate(in_group.format("box", here.sid) + " !== null")
            # The link drops: the page says so, with ssh's words, where the thread is.
            await machine.stop(kill_sessions=True)
            await page.wait_for(group.format("box") + ".dataset.state === 'down'")
            head = await page.evaluate(group.format("box") + ".innerText")
            assert "down" in head and "ssh to devbox failed" in head
            # The machine's kind and where it is, before why it is down.
            said = await page.evaluate(group.format("box") + ".querySelector('.muted').innerText")
            assert said.startswith(f"ssh {machine.host} · ssh to devbox failed"), said


def patch_on(patch: str) -> str:
    """A prompt whose model applies ``patch`` (``*** Begin Patch`` ... ``*** End Patch``)."""
    line = json.dumps({"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF\n"})
    return f"@@ call exec_command {line}\n@@ then\n@@ say patched"


def adds(name: str, text: str) -> str:
    return patch_on(f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch")


async def rewind_on_the_machine(talk: Conversation, machine: SshMachine, workspace: Path) -> str:
    """Two patches on the machine, one of their files changed there since, then ``/rewind 2``:
    its answer. A file of the same name here shows that nothing here is touched."""
    await set_machine(talk, "box")
    await talk.said(adds("a.txt", "one"))
    # What the patch's tool call showed: Codex's words when it did not land there.
    assert (machine.workspace / "a.txt").exists(), tool_texts(talk)
    await talk.said(adds("b.txt", "two"))
    assert (machine.workspace / "b.txt").exists(), tool_texts(talk)
    assert (machine.workspace / "a.txt").read_text() == "one\n"
    (machine.workspace / "b.txt").write_text("two\nmine\n")
    (workspace / "a.txt").write_text("one\n")  # what a rewind on this machine would remove
    answer = await talk.said("/rewind 2")
    assert "**Rewound 2 prompts.**" in answer, answer
    return answer


def assert_rewound_there(answer: str, machine: SshMachine, workspace: Path) -> None:
    # Taken back on the machine: a.txt gone; b.txt changed there since, kept and named.
    assert not (machine.workspace / "a.txt").exists(), answer
    assert (machine.workspace / "b.txt").read_text() == "two\nmine\n"
    assert "Files returned to what they were (on box):" in answer
    assert "a.txt`: removed (the prompt created it)" in answer
    assert "Left alone (on box) (changed since, so not undone):" in answer
    assert "b.txt`: it changed since" in answer and "+two" in answer
    # Nothing here was touched.
    assert (workspace / "a.txt").read_text() == "one\n"
    assert not (workspace / "b.txt").exists()


async def test_rewind_on_a_machine_takes_back_its_files_there_and_keeps_a_conflict(
    open_on: OpenOn, machine: SshMachine, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_on() as talk:
            answer = await rewind_on_the_machine(talk, machine, workspace)
            assert_rewound_there(answer, machine, workspace)
            # A file edited on the machine is written back there.
            (machine.workspace / "c.txt").write_text("keep\n")
            os.chown(machine.workspace / "c.txt", machine.uid, -1)
            edit = "*** Begin Patch\n*** Update File: c.txt\n@@\n-keep\n+changed\n*** End Patch"
            await talk.said(patch_on(edit))
            assert (machine.workspace / "c.txt").read_text() == "changed\n"
            answer = await talk.said("/rewind")
            assert "c.txt`: its edit undone" in answer, answer
    assert (machine.workspace / "c.txt").read_text() == "keep\n"


async def test_through_the_daemon_rewind_on_a_machine_takes_back_its_files_there(
    start_daemon: StartDaemon, open_attached: OpenAttached, machine: SshMachine, workspace: Path
) -> None:
    """An editor attached to the daemon has no relay of its own: it reaches the machine's
    files over its own ssh, as the daemon's link reaches the machine."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with start_daemon(*daemon_options(machine, "--no-page")), open_attached() as talk:
            answer = await rewind_on_the_machine(talk, machine, workspace)
    assert_rewound_there(answer, machine, workspace)


async def test_a_rewind_on_a_machine_is_recorded_and_replays_with_the_machine_s_answers(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    machine: SshMachine,
    workspace: Path,
    tmp_path: Path,
) -> None:
    """The exec-server's answers are in the recording (the engine's calls are the shell's to
    carry): a replay takes the same files back, without the machine."""
    from bridge.recording import read_recording, replay

    out = tmp_path / "rewind.codex.jsonl"
    argv = [sys.executable, "-m", "bridge", "record", "--out", str(out)]
    argv += ["--machine", box_machine(machine)]
    argv += ["--ssh-command", machine.ssh_command]
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(argv=argv, env=bridge_env, on_request=approving([])) as talk:
            answer = await rewind_on_the_machine(talk, machine, workspace)
    assert_rewound_there(answer, machine, workspace)
    recorded = out.read_text()
    assert '"event":"machine_answered"' in recorded
    transcript = replay(read_recording(str(out))).text()
    assert "Files returned to what they were (on box):" in transcript
