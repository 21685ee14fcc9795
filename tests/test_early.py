"""``serve``'s first moments before trio (``bridge.shell.early``): Codex's handshake written,
what the client already sent handed to the engine, whole messages only, and the rest left for
the shell in order."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
import pytest

from bridge.engine import Engine
from bridge.shell import early
from bridge.shell.codex_process import CodexProcess
from bridge.shell.streams import LineStream

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}'


@dataclass
class Pipes:
    """The client's side of a bridge's stdio, and the bridge's."""

    to_bridge: int
    from_bridge: int
    bridge: tuple[int, int]

    def answers(self) -> list[dict[str, object]]:
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


@pytest.fixture
def codex() -> Iterator[CodexProcess]:
    """A "Codex" that reads its stdin and says nothing: what is written to it stays there."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    popen = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    process = CodexProcess(popen, stdin_w, stdout_r, stderr_r, ["codex", "app-server"])
    process.read_end = stdin_r  # type: ignore[attr-defined]
    yield process
    popen.wait()
    for fd in (stdin_r, stdout_w, stderr_w):
        os.close(fd)
    process.close()


def written_to(process: CodexProcess) -> list[dict[str, object]]:
    fd: int = process.read_end  # type: ignore[attr-defined]
    os.set_blocking(fd, False)
    return [msgspec.json.decode(line) for line in os.read(fd, 1 << 20).splitlines()]


def test_initialize_is_answered_and_what_needs_codex_waits_with_the_partial_rest_kept(
    pipes: Pipes, codex: CodexProcess
) -> None:
    os.write(pipes.to_bridge, INIT + b"\n" + NEW + b"\n" + NEW[:20])
    engine = Engine()
    started = early.begin(engine, codex, stdio=pipes.bridge)
    # Codex's handshake went out first, then the client's initialize was answered.
    assert started.handshake_sent
    assert [m.get("method") for m in written_to(codex)] == ["initialize"]
    answers = pipes.answers()
    assert [a["id"] for a in answers] == [0]
    assert "agentCapabilities" in answers[0]["result"]  # type: ignore[operator]
    # session/new waits in the engine for Codex, as it would in the shell; the line begun
    # and not ended is the shell's to finish reading.
    assert engine.client_waiting
    assert started.received == NEW[:20]


async def test_the_shell_reads_the_bytes_left_before_what_arrives_after() -> None:
    import trio

    left, right = trio.testing.memory_stream_pair()
    stream = LineStream(right, right, received=b'{"a": 1}\n{"b"')
    await left.send_all(b": 2}\n")
    assert await stream.receive() == b'{"a": 1}'
    assert await stream.receive() == b'{"b": 2}'


def test_nothing_sent_yet_is_nothing_to_answer(pipes: Pipes) -> None:
    started = early.begin(Engine(), None, stdio=pipes.bridge)
    assert not started.handshake_sent
    assert pipes.answers() == []
    assert started.received == b""


def test_without_a_codex_of_its_own_no_handshake_is_sent_and_initialize_still_answered(
    pipes: Pipes,
) -> None:
    os.write(pipes.to_bridge, INIT + b"\n")
    started = early.begin(Engine(), None, stdio=pipes.bridge)
    assert not started.handshake_sent
    assert [a["id"] for a in pipes.answers()] == [0]


def test_what_waits_for_codex_waits_here_too_and_past_the_budget_answers_are_the_shells(
    pipes: Pipes,
) -> None:
    # Before Codex's handshake only initialize is answered (the engine's rule 2): a message
    # that is not one waits, even one that cannot be read.
    os.write(pipes.to_bridge, b"not json\n" + INIT + b"\n")
    engine = Engine()
    started = early.begin(engine, None, stdio=pipes.bridge)
    assert pipes.answers() == [] and engine.client_waiting
    assert started.received == b""


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
