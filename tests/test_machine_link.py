"""The machine link's listener, with a stand-in ssh that always fails: what Codex's
connections cost while a machine is down."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from websockets.exceptions import InvalidStatus
from websockets.trio.client import connect

from bridge.machines import command_machine, parse_url
from bridge.shell import machine_link
from bridge.shell.link_record import Link
from bridge.shell.machine_link import DOWN_RETRY_SECONDS, MachineLinks


def refused_ssh(directory: Path, first: str) -> list[str]:
    """An ssh that runs the shell line ``first`` and, unless that exits, is refused as ssh
    is (status 255)."""
    script = directory / "ssh"
    script.write_text(
        f"#!/bin/sh\n{first}\n"
        "echo 'ssh: connect to host devbox port 22: Connection refused' >&2\nexit 255\n"
    )
    script.chmod(0o755)
    return [str(script)]


def counting_failing_ssh(directory: Path) -> tuple[list[str], Path]:
    """An ssh that notes each run in a file and fails as ssh does (status 255)."""
    runs = directory / "runs"
    return refused_ssh(directory, f"echo run >> {runs}"), runs


async def test_while_a_machine_is_down_codexs_quick_retries_run_one_ssh_a_second(
    tmp_path: Path,
) -> None:
    ssh, runs = counting_failing_ssh(tmp_path)
    links = MachineLinks([parse_url("box", "ssh://devbox/src")], ssh=ssh)
    link = links.links["box"]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            headers = {"Authorization": f"Bearer {link.token}"}
            statuses = []
            # Codex tries again several times a second while its machine is away.
            for _ in range(10):
                try:
                    async with connect(link.url, additional_headers=headers) as ws:
                        await ws.wait_closed()
                    statuses.append(101)
                except InvalidStatus as refused:
                    statuses.append(refused.response.status_code)
                await trio.sleep(0.02)
            assert link.state == "down"
            assert "Connection refused" in link.reason
            # The first ran ssh and found the machine down; the rest, within a second of
            # it, were refused at once, with no ssh.
            assert runs.read_text().count("run") == 1
            assert statuses.count(503) >= 8
            await trio.sleep(DOWN_RETRY_SECONDS)
            try:
                async with connect(link.url, additional_headers=headers) as ws:
                    await ws.wait_closed()
            except InvalidStatus:
                raise AssertionError("refused after a second: never tried again") from None
            assert runs.read_text().count("run") >= 2
            nursery.cancel_scope.cancel()


def switchable_ssh(directory: Path) -> tuple[list[str], Path]:
    """An ssh that reaches the machine (its Codex says its version) while the file it
    returns exists, and is refused as ssh is otherwise."""
    up = directory / "up"
    return refused_ssh(directory, f"if [ -e {up} ]; then echo 'codex-cli 0.171.0'; exit 0; fi"), up


#: What the daemon says of its link once a session it relayed was killed.
DROPPED = "ssh to devbox failed: Connection to 127.0.0.1 closed by remote host."


class Daemon:
    """The daemon's published word on machine ``box``, and how often it was read."""

    def __init__(self) -> None:
        self.word = ("down", DROPPED)
        self.reads = 0
        #: Called on a read, before it answers (what happens in that instant).
        self.meanwhile: Callable[[], None] | None = None

    def published(self) -> dict[str, tuple[str, str]]:
        self.reads += 1
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return {"box": self.word}

    async def polls(self, count: int) -> None:
        """Until the follower read the word ``count`` more times."""
        until = self.reads + count
        while self.reads < until:  # noqa: ASYNC110 (a counter: no event to wait on)
            await trio.sleep(0.01)


def attached(
    daemon: Daemon,
    ssh: list[str],
    changes: list[tuple[str, str]],
    kind: type[MachineLinks] = MachineLinks,
) -> MachineLinks:
    """The check-only links of an editor attached to ``daemon`` (machine ``box``), each
    change of state they tell the engine appended to ``changes``."""
    return kind(
        [parse_url("box", "ssh://devbox/src")],
        ssh=ssh,
        relay=False,
        published=daemon.published,
        on_change=lambda _name, state, reason: changes.append((state, reason)),
    )


async def until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110
        await trio.sleep(0.01)


async def test_attached_a_check_that_found_the_machine_back_is_not_undone_by_the_daemons_older_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's relay dropped when the machine went (its word: down, ssh's words for the
    killed session); the machine is back, and a prompt's own check found it up before the
    daemon tried again. The daemon's word, unchanged since, is older than that check."""
    # The daemon's word stays down: the check waits for Codex's link only a moment here.
    monkeypatch.setattr(machine_link, "CODEX_RETRY_SECONDS", 0.2)
    ssh, up = switchable_ssh(tmp_path)
    daemon = Daemon()
    changes: list[tuple[str, str]] = []
    links = attached(daemon, ssh, changes)
    link = links.links["box"]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            await until(lambda: changes == [("down", DROPPED)])
            up.touch()
            links.want("box")
            await until(lambda: changes[-1][0] == "connected")
            await daemon.polls(3)
            assert changes == [("down", DROPPED), ("connecting", ""), ("connected", "")]
            assert (link.state, link.reason) == ("connected", "")
            # A new word from the daemon is news again.
            daemon.word = ("down", "ssh to devbox failed: Connection reset")
            await until(lambda: link.state == "down")
            assert changes[-1] == ("down", "ssh to devbox failed: Connection reset")
            nursery.cancel_scope.cancel()


async def test_attached_a_prompt_in_the_instant_the_daemons_word_is_read_gets_its_own_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt's check found the machine down in its own words; the machine comes back and
    the next prompt asks for it just as the follower reads the daemon's older word: that
    prompt is answered by its own check, not failed with the daemon's stale reason."""
    monkeypatch.setattr(machine_link, "CODEX_RETRY_SECONDS", 0.2)
    ssh, up = switchable_ssh(tmp_path)
    daemon = Daemon()
    changes: list[tuple[str, str]] = []
    links = attached(daemon, ssh, changes)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            await until(lambda: changes == [("down", DROPPED)])
            links.want("box")  # the machine is still away: its check says so
            await until(lambda: len(changes) == 3)
            assert changes[-1][0] == "down" and "Connection refused" in changes[-1][1]
            up.touch()
            asked = len(changes)
            daemon.meanwhile = lambda: links.want("box")  # the next prompt, in that instant
            await until(lambda: changes[-1][0] in ("connected", "down") and len(changes) > asked)
            # What the prompt waited on: its own check's answer, first.
            assert changes[asked:][:2] == [("connecting", ""), ("connected", "")], changes
            nursery.cancel_scope.cancel()


class Answering(MachineLinks):
    """Links whose own check finds the machine at once (``ssh HOST codex --version``)."""

    async def check(self, link: Link) -> str | None:
        return None


def exec_server_ssh(directory: Path) -> tuple[list[str], Path]:
    """An ssh whose remote Codex says its version and then echoes what it is sent (an
    exec-server, for the relay) while the file it returns exists; refused otherwise."""
    up = directory / "up"
    return refused_ssh(
        directory, f"if [ -e {up} ]; then echo 'codex-cli 0.171.0'; exec cat; fi"
    ), up


async def test_a_machine_found_back_after_codexs_connection_failed_waits_for_codexs_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's connection failed (the machine was away); the machine is back and a prompt
    wants it: connected is said once Codex's next connection reached it, not before (a
    command Codex runs in its pause before that connection fails at once, silently)."""
    # Only Codex's connection ends the wait here, not the end of its pause.
    monkeypatch.setattr(machine_link, "CODEX_RETRY_SECONDS", 600.0)
    ssh, up = exec_server_ssh(tmp_path)
    changes: list[tuple[str, str]] = []
    links = Answering(
        [parse_url("box", "ssh://devbox/src")],
        ssh=ssh,
        on_change=lambda _name, state, reason: changes.append((state, reason)),
    )
    link = links.links["box"]
    headers = {"Authorization": f"Bearer {link.token}"}
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            async with connect(link.url, additional_headers=headers) as codex:
                await codex.wait_closed()
            assert link.state == "down"
            up.touch()
            links.want("box")
            await trio.testing.wait_all_tasks_blocked()
            assert link.state == "connecting", changes
            async with connect(link.url, additional_headers=headers) as codex:
                await codex.send("hello")
                assert await codex.recv() == "hello"
                assert link.state == "connected"
            nursery.cancel_scope.cancel()


async def test_attached_a_machine_found_back_waits_for_the_daemons_word_on_codexs_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the daemon: this process's check reaches the machine, while the daemon says
    Codex's link is down: the prompt waits for the daemon's word that Codex is back."""
    monkeypatch.setattr(machine_link, "CODEX_RETRY_SECONDS", 600.0)
    daemon = Daemon()
    changes: list[tuple[str, str]] = []
    links = attached(daemon, ["ssh"], changes, kind=Answering)
    link = links.links["box"]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(links.run)
            links.want("box")
            await trio.testing.wait_all_tasks_blocked()
            assert link.state == "connecting", changes
            daemon.word = ("connected", "")
            await until(lambda: link.state == "connected")
            assert changes[-2:] == [("connecting", ""), ("connected", "")]
            nursery.cancel_scope.cancel()


async def test_a_runtime_missing_from_path_is_named_at_once(tmp_path: Path) -> None:
    """``podman://`` with no podman on ``PATH`` (here: a command machine's program that is
    nowhere): the check says so in the system's words, in no time."""
    spec = command_machine("pod", ["no-such-runtime-here", "exec", "-i", "ctr"])
    links = MachineLinks([spec], ssh=["ssh"], relay=False)
    with trio.fail_after(5):
        why = await links.check(links.links["pod"])
    assert why == "could not run 'no-such-runtime-here': No such file or directory"
