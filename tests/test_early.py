"""``serve``'s first moments before trio (``bridge.shell.early``): Codex's handshake written,
the client's first requests carried to the engine and Codex and answered, and whatever this was
not made for left to the shell, whole and in order."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from bridge.engine import Engine
from bridge.shell import early
from bridge.shell.codex_process import CodexProcess, start_codex
from bridge.shell.streams import LineStream

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'


def new_session(cwd: str, rid: int = 1) -> bytes:
    params = {"cwd": cwd, "mcpServers": []}
    return msgspec.json.encode(
        {"jsonrpc": "2.0", "id": rid, "method": "session/new", "params": params}
    )


NEW = new_session("/")
PROMPT = b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}'


@dataclass
class Pipes:
    """The client's side of a bridge's stdio, and the bridge's."""

    to_bridge: int
    from_bridge: int
    bridge: tuple[int, int]

    def answers(self) -> list[dict[str, Any]]:
        """What the bridge wrote so far, decoded (nothing written: an empty list)."""
        os.set_blocking(self.from_bridge, False)
        try:
            data = os.read(self.from_bridge, 1 << 20)
        except BlockingIOError:
            return []
        return [msgspec.json.decode(line) for line in data.splitlines()]


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    client_in, to_bridge = os.pipe()
    from_bridge, client_out = os.pipe()
    yield Pipes(to_bridge, from_bridge, (client_in, client_out))
    for fd in (client_in, to_bridge, from_bridge, client_out):
        os.close(fd)


@dataclass
class SilentCodex:
    """A "Codex" that reads nothing and says nothing: what is written to it stays in its
    pipe, to be read by the test; closing ``says`` is Codex closing its output."""

    process: CodexProcess
    hears: int
    says: int

    def heard(self) -> list[dict[str, Any]]:
        os.set_blocking(self.hears, False)
        return [msgspec.json.decode(line) for line in os.read(self.hears, 1 << 20).splitlines()]


@pytest.fixture
def silent_codex() -> Iterator[SilentCodex]:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    popen = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    process = CodexProcess(popen, stdin_w, stdout_r, stderr_r, ["codex", "app-server"])
    yield SilentCodex(process, stdin_r, stdout_w)
    popen.wait()
    for fd in (stdin_r, stdout_w, stderr_w):
        with contextlib.suppress(OSError):  # the test may have closed it
            os.close(fd)
    process.close()


def test_attached_initialize_is_answered_and_the_rest_left_whole_for_the_shell(
    pipes: Pipes,
) -> None:
    # Without a Codex of its own (a daemon's, reached by the shell), one look at what is there.
    os.write(pipes.to_bridge, INIT + b"\n" + NEW + b"\n" + NEW[:20])
    started = early.begin(Engine(), None, stdio=pipes.bridge)
    assert not started.handshake_sent
    answers = pipes.answers()
    assert [a["id"] for a in answers] == [0]
    assert "agentCapabilities" in answers[0]["result"]
    assert started.received == NEW + b"\n" + NEW[:20]


async def test_the_shell_reads_the_bytes_left_before_what_arrives_after() -> None:
    left, right = trio.testing.memory_stream_pair()
    stream = LineStream(right, right, received=b'{"a": 1}\n{"b"')
    await left.send_all(b": 2}\n")
    assert await stream.receive() == b'{"a": 1}'
    assert await stream.receive() == b'{"b": 2}'


def test_nothing_sent_yet_is_nothing_to_answer(pipes: Pipes) -> None:
    started = early.begin(Engine(), None, stdio=pipes.bridge)
    assert pipes.answers() == []
    assert started.received == b""


def test_a_message_of_another_kind_ends_it_untouched_with_everything_after_it(
    pipes: Pipes, silent_codex: SilentCodex
) -> None:
    sent = INIT + b"\n" + PROMPT + b"\n" + NEW + b"\n"
    os.write(pipes.to_bridge, sent)
    engine = Engine()
    began = time.monotonic()
    started = early.begin(engine, silent_codex.process, stdio=pipes.bridge, seconds=30)
    assert time.monotonic() - began < 10, "a prompt must end it at once, not at its deadline"
    assert started.handshake_sent
    assert [m["method"] for m in silent_codex.heard()] == ["initialize"]
    assert [a["id"] for a in pipes.answers()] == [0]
    assert started.received == PROMPT + b"\n" + NEW + b"\n"
    assert not engine.client_waiting


def test_a_request_codex_has_not_answered_by_the_deadline_is_handed_over_waiting(
    pipes: Pipes, silent_codex: SilentCodex
) -> None:
    os.write(pipes.to_bridge, INIT + b"\n" + NEW + b"\n")
    engine = Engine()
    started = early.begin(engine, silent_codex.process, stdio=pipes.bridge, seconds=0.3)
    assert [a["id"] for a in pipes.answers()] == [0]
    # session/new was the engine's: it waits there for Codex's handshake, as in the shell.
    assert started.received == b""
    assert engine.client_waiting


def test_codex_closing_its_output_ends_it_at_once(pipes: Pipes, silent_codex: SilentCodex) -> None:
    os.write(pipes.to_bridge, INIT + b"\n" + NEW + b"\n")
    os.write(silent_codex.says, b'{"id":0,"res')
    os.close(silent_codex.says)
    began = time.monotonic()
    started = early.begin(Engine(), silent_codex.process, stdio=pipes.bridge, seconds=30)
    assert time.monotonic() - began < 10
    # What Codex said before it closed is the shell's to read (and to find the end of).
    assert silent_codex.process.stdout_read == b'{"id":0,"res'
    assert started.received == b""


def test_an_editor_gone_ends_it(pipes: Pipes, silent_codex: SilentCodex) -> None:
    began = time.monotonic()
    early.begin(
        Engine(), silent_codex.process, stdio=pipes.bridge, parent=os.getppid() + 1, seconds=30
    )
    assert time.monotonic() - began < 10


def test_a_request_whose_id_is_no_id_is_refused_as_in_the_shell_and_the_next_one_served(
    pipes: Pipes,
) -> None:
    no_id = INIT.replace(b'"id":0', b'"id":{}')
    os.write(pipes.to_bridge, no_id + b"\n" + INIT + b"\n")
    early.begin(Engine(), None, stdio=pipes.bridge)
    refused, served = pipes.answers()
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert served["id"] == 0 and "result" in served


def test_answers_stop_at_the_budget_and_the_messages_after_it_are_left_whole_in_order(
    pipes: Pipes,
) -> None:
    # A client that repeats initialize (ACP v1 allows it): each answered here, up to the
    # budget, so that no write here can fill the pipe of a client that is not reading.
    inits = [INIT.replace(b'"id":0', f'"id":{n}'.encode()) for n in range(60)]
    os.write(pipes.to_bridge, b"\n".join(inits) + b"\n")
    started = early.begin(Engine(), None, stdio=pipes.bridge)
    answers = pipes.answers()
    assert [a["id"] for a in answers] == list(range(len(answers)))
    assert 0 < len(answers) < len(inits)
    written = sum(len(msgspec.json.encode(a)) + 1 for a in answers)
    assert (
        early.EARLY_BYTES <= written < early.EARLY_BYTES + len(msgspec.json.encode(answers[0])) + 2
    )
    assert started.received.split(b"\n") == [*inits[len(answers) :], b""]


@pytest.mark.e2e
async def test_the_first_session_opens_before_the_shell_runs(
    pipes: Pipes, codex_bin: str, codex_home: Path, workspace: Path
) -> None:
    """Against the real Codex: what an editor sends at once, initialize and session/new, is
    answered here, and the shell is left the rest of Codex's output."""
    os.write(pipes.to_bridge, INIT + b"\n" + new_session(str(workspace)) + b"\n")
    codex = start_codex(codex_bin, env={**os.environ, "CODEX_HOME": str(codex_home)})
    try:
        # In a thread: the scripted model serves in this one meanwhile.
        begin = functools.partial(
            early.begin, Engine(paged_store=True), codex, stdio=pipes.bridge, seconds=60
        )
        with trio.fail_after(90):
            started = await trio.to_thread.run_sync(begin)
        answers = {a["id"]: a for a in pipes.answers() if "id" in a and "method" not in a}
        assert sorted(answers) == [0, 1]
        assert answers[1]["result"]["sessionId"]
        assert started.received == b""
    finally:
        codex.close()
        codex.popen.wait(timeout=30)
