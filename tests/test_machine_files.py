"""The shell's calls to a machine's own exec-server (``bridge/shell/machine_files.py``): the
real ``codex exec-server`` behind a stand-in ssh (``tests/support/standin_ssh.py``; the real
sshd is ``tests/test_e2e_machines.py``'s), the answers as the engine gets them."""

from __future__ import annotations

import base64
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from bridge import machines as spec_of
from bridge.codex.files import file_uri
from bridge.engine import MachineCall
from bridge.shell.effects import MachineAnswer, answer_data, answer_of
from bridge.shell.machine_files import MachineCalls
from tests.support.standin_ssh import StandInMachine, stand_in_machine
from tests.test_doctor_machines import native_codex, ws_exec_server  # noqa: F401 (fixtures)

SECONDS = 60


@pytest.fixture
async def box(tmp_path: Path, codex_bin: str) -> AsyncIterator[StandInMachine]:
    async with stand_in_machine(tmp_path / "box", codex_bin) as found:
        yield found


def calls_to(box: StandInMachine, ssh_command: str | None = None) -> MachineCalls:
    spec = spec_of.parse_url("box", box.url)
    return MachineCalls([spec], shlex.split(ssh_command or box.ssh_command))


async def ask(
    calls: MachineCalls, *asked: tuple[str, dict[str, Any]], machine: str = "box"
) -> list[MachineAnswer]:
    """Each call carried at once; their answers, in the order asked."""
    answers: list[MachineAnswer | None] = [None] * len(asked)
    done = trio.Event()

    def answered(index: int) -> Any:
        def keep(answer: MachineAnswer) -> None:
            assert answers[index] is None, "answered twice"
            answers[index] = answer
            if all(a is not None for a in answers):
                done.set()

        return keep

    for index, (method, params) in enumerate(asked):
        call = MachineCall(machine, f"k{index}", method, msgspec.json.encode(params))
        calls.call(call, answered(index))
    await done.wait()
    return [a for a in answers if a is not None]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_files_are_read_written_and_removed_by_the_machine_s_exec_server(
    box: StandInMachine,
) -> None:
    calls = calls_to(box)
    there = box.workspace / "sub dir"
    there.mkdir()
    (there / "a.txt").write_bytes(b"caf\xe9\n")
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            read, missing, folder = await ask(
                calls,
                ("fs/readFile", {"path": file_uri(str(there / "a.txt"))}),
                ("fs/readFile", {"path": file_uri(str(there / "gone.txt"))}),
                ("fs/readFile", {"path": file_uri(str(there))}),
            )
            assert read[0] is not None
            assert msgspec.json.decode(read[0]) == {"dataBase64": b64(b"caf\xe9\n")}
            assert missing[0] is None and missing[2].endswith("(os error 2)")
            assert folder[0] is None and "is not a file" in folder[2]
            # After the first answers: the same connection, or a new one, alike.
            wrote, made, removed = await ask(
                calls,
                ("fs/writeFile", {"path": file_uri(str(there / "a.txt")), "dataBase64": b64(b"x")}),
                (
                    "fs/createDirectory",
                    {"path": file_uri(str(there / "d" / "e")), "recursive": True},
                ),
                ("fs/remove", {"path": file_uri(str(there / "d")), "recursive": False}),
            )
            assert wrote == (b"{}", 0, "") and made == (b"{}", 0, "")
            assert removed[0] is None and "not empty" in removed[2].lower()
            nursery.cancel_scope.cancel()
    assert (there / "a.txt").read_bytes() == b"x"
    assert (there / "d" / "e").is_dir()


async def test_a_machine_ssh_cannot_reach_answers_every_call_with_ssh_s_words(
    box: StandInMachine,
) -> None:
    calls = calls_to(box, box.refused_login_command)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            answers = await ask(
                calls,
                ("fs/readFile", {"path": file_uri(str(box.workspace / "a.txt"))}),
                ("fs/readFile", {"path": file_uri(str(box.workspace / "b.txt"))}),
            )
            nursery.cancel_scope.cancel()
    for result, code, message in answers:
        assert result is None and code == -32603
        assert message.startswith("machine box: ssh to devbox failed: ")
        assert "Permission denied" in message


async def test_a_machine_not_named_here_is_answered_at_once(box: StandInMachine) -> None:
    calls = calls_to(box)
    got: list[MachineAnswer] = []
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            calls.call(MachineCall("gpu", "k", "fs/readFile", b"{}"), got.append)
            nursery.cancel_scope.cancel()
    assert got == [(None, -32603, "this bridge runs no link to the machine gpu")]


async def test_a_ws_machine_s_exec_server_is_called_with_its_token(
    ws_exec_server: tuple[str, Path],  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    url, token = ws_exec_server
    spec = spec_of.gather([f"lab={url}"], [f"lab={token}"], file=tmp_path / "none.toml")
    calls = MachineCalls(spec, ["ssh"])
    (tmp_path / "a.txt").write_text("here\n")
    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-token")
    refused = MachineCalls(
        spec_of.gather([f"lab={url}"], [f"lab={wrong}"], file=tmp_path / "none.toml"), ["ssh"]
    )
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            await nursery.start(refused.run)
            [read] = await ask(
                calls, ("fs/readFile", {"path": file_uri(str(tmp_path / "a.txt"))}), machine="lab"
            )
            [denied] = await ask(
                refused, ("fs/readFile", {"path": file_uri(str(tmp_path / "a.txt"))}), machine="lab"
            )
            nursery.cancel_scope.cancel()
    assert read[0] is not None
    assert msgspec.json.decode(read[0]) == {"dataBase64": b64(b"here\n")}
    assert denied[0] is None and denied[2].startswith("machine lab: the connection to ")
    assert "401" in denied[2]


def test_an_answer_is_recorded_and_read_back_as_it_was() -> None:
    for answer in [(b'{"dataBase64":"aGkK"}', 0, ""), (None, -32004, "No such file (os error 2)")]:
        assert answer_of(answer_data("bridge-machine-3", answer)) == ("bridge-machine-3", answer)
