"""What ``serve`` does before trio is imported: the first tenth of a second of an editor's wait.

An editor starts its agent for every new thread and waits for the answer to ``initialize``.
trio and the shell take about as long to import again as the engine (which is pure, and
answers ``initialize`` without Codex). So ``serve`` starts Codex first, when it runs one of
its own (:func:`~bridge.shell.codex_process.start_codex`: its start then overlaps the
bridge's), builds the engine, and then, here:

1. takes fds 0 and 1 for the protocol and points fd 1 at stderr (:func:`take_stdio`), so
   nothing else in the process ever writes into the protocol stream;
2. writes the engine's handshake into Codex's stdin (Codex answers it while trio loads);
3. hands the engine what the client has already sent, whole messages only: ``initialize`` is
   answered at once, as it always is; anything else waits in the engine for Codex's
   handshake, as it would have in the shell.

Then trio is imported and the shell takes over (:func:`bridge.serve.serve`): the pipes, the
Codex process, the engine, and the bytes read here that are not a whole message yet. Nothing
here waits: what the client has not sent yet is read by the shell. The effects go through
the shell's one dispatch (:func:`~bridge.shell.effects.carry_out`), written with plain
blocking writes, bounded by :data:`EARLY_BYTES` so that no write here can fill a pipe.
"""

from __future__ import annotations

import os
import select
import sys
from dataclasses import dataclass

from ..engine import Engine, ToClient, ToCodex
from .codex_process import CodexProcess
from .effects import Tap, carry_out

#: Most bytes read from the client here, and most written to it: far below a pipe's
#: buffer, so that a blocking write here never waits on a client that is not reading.
EARLY_BYTES = 16 * 1024


@dataclass
class Early:
    """What the shell takes over."""

    #: The protocol's private copies of stdin and stdout (:func:`take_stdio`).
    client_in: int
    client_out: int
    #: The client's bytes read here and not handled: the shell's reader starts with them.
    received: bytes = b""
    #: The Codex started before trio (``None``: the shell reaches Codex itself).
    codex: CodexProcess | None = None
    #: The engine's handshake is written to ``codex``.
    handshake_sent: bool = False


def take_stdio() -> tuple[int, int]:
    """Private duplicates of stdin and stdout for the protocol; fd 1 itself is then pointed
    at stderr, so that nothing else in the process (a stray ``print``, a library warning, a
    child process) can ever write a byte into the protocol stream."""
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_in, protocol_out


def begin(
    engine: Engine,
    codex: CodexProcess | None,
    tap: Tap | None = None,
    *,
    stdio: tuple[int, int] | None = None,
) -> Early:
    """Steps 1 to 3 of the module's docstring (``stdio``: the client's two descriptors,
    when not this process's own)."""
    client_in, client_out = take_stdio() if stdio is None else stdio
    early = Early(client_in, client_out, codex=codex)
    written = 0

    def to_client(effect: ToClient) -> None:
        nonlocal written
        written += _write_all(client_out, effect.data)

    def to_codex(effect: ToCodex) -> None:
        assert codex is not None
        _write_all(codex.stdin, effect.data)

    send_codex = to_codex if codex is not None else None
    if codex is not None:
        try:
            carry_out(engine.start(), engine, tap, to_client, send_codex)
            early.handshake_sent = True
        except OSError:  # Codex is gone already: the shell finds out, and says why
            return early
    try:
        readable, _, _ = select.select([client_in], [], [], 0)
        data = os.read(client_in, EARLY_BYTES) if readable else b""
    except OSError:
        return early  # the shell's reader meets the same and reports it
    *lines, rest = data.split(b"\n")
    for index, line in enumerate(lines):
        if written >= EARLY_BYTES:
            # Enough answered here: the rest is the shell's, whose writes wait for the client.
            rest = b"\n".join([*lines[index:], rest])
            break
        line = line.strip()
        if not line:
            continue
        if tap:
            tap.message("from_client", line)
        try:
            carry_out(engine.receive_client(line), engine, tap, to_client, send_codex)
        except OSError:
            # A side went away mid-write: what is left is the shell's to meet and report.
            rest = b"\n".join([*lines[index + 1 :], rest])
            break
    early.received = rest
    return early


def _write_all(fd: int, data: bytes) -> int:
    line = data + b"\n"
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view) :]
    return len(line)
