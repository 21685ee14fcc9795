"""What ``serve`` does before trio is imported: the first tenth of a second of an editor's wait.

An editor starts its agent for every new thread, sends ``initialize`` and ``session/new``, and
waits. trio and the shell take about as long to import again as the engine (which is pure, and
answers ``initialize`` without Codex). So ``serve`` starts Codex first, when it runs one of its
own (:func:`~bridge.shell.codex_process.start_codex`: its start then overlaps the bridge's),
builds the engine, and then, here:

1. takes fds 0 and 1 for the protocol and points fd 1 at stderr (:func:`take_stdio`), so
   nothing else in the process ever writes into the protocol stream;
2. writes the engine's handshake into Codex's stdin;
3. carries messages between the client, the engine and Codex with plain blocking reads and
   writes, for the client's first requests only (:data:`EARLY_METHODS`: ``initialize``, and
   with a Codex of its own ``session/new``), until the client waits on none of them.

Then trio is imported and the shell takes over (:func:`bridge.serve.serve`): the pipes, the
Codex process, the engine, and every byte read here that is not handled yet. So the editor's
first session opens while trio loads, and trio costs it nothing.

This is no second shell: it ends at the first thing it was not made for, and hands that over
untouched. A client message of any other method (a prompt), a peer that closes or fails, more
than :data:`EARLY_BYTES` written to the client (no write here can fill its pipe), more than
:data:`EARLY_HELD_BYTES` of one side's input held unhandled, :data:`EARLY_SECONDS` gone, or
the editor gone: each ends it at once. What arrives is handled in arrival order through the shell's own dispatch
(:func:`~bridge.shell.effects.carry_out`), so the engine sees what it would have seen in the
shell. Attached to a Codex it did not start (a daemon's), only what the client has already
sent is handed to the engine: ``initialize`` is answered, the rest waits there for Codex.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from ..engine import Engine, ToClient, ToCodex
from .codex_process import CodexProcess
from .effects import Tap, carry_out

#: The client's requests handled here: what an editor sends first and waits on.
EARLY_METHODS = frozenset({"initialize", "session/new"})
#: Most bytes written to the client here: far below a pipe's buffer, so that a blocking
#: write here never waits on a client that is not reading.
EARLY_BYTES = 16 * 1024
#: Most bytes of one side's input held here unhandled (a message still arriving): past it,
#: the shell's reader, with its own bound on a message, takes over.
EARLY_HELD_BYTES = 1024 * 1024
#: Longest this runs before the shell takes over whatever is under way.
EARLY_SECONDS = 1.0
#: How often the editor is looked for while nothing arrives.
_PARENT_POLL = 0.1


@dataclass
class Early:
    """What the shell takes over."""

    #: The protocol's private copies of stdin and stdout (:func:`take_stdio`).
    client_in: int
    client_out: int
    #: The client's bytes read here and not handled: the shell's reader starts with them.
    received: bytes = b""
    #: The Codex started before trio (``None``: the shell reaches Codex itself), with the
    #: output read of it here and not handled (``stdout_read``, ``stderr_read``).
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


class _Peek(msgspec.Struct):
    """The two members that say what a JSON-RPC message is."""

    id: Any = None
    method: Any = None


_PEEK = msgspec.json.Decoder(_Peek)


def _request_id(said: _Peek) -> int | float | str | None:
    """The id a request is answered under, if it is one (any other value is no id: the
    engine refuses it, under ``null``)."""
    rid = said.id
    return rid if isinstance(rid, int | float | str) and not isinstance(rid, bool) else None


def _peek(data: bytes) -> _Peek:
    try:
        return _PEEK.decode(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError too: not an object
        return _Peek()


def begin(
    engine: Engine,
    codex: CodexProcess | None,
    tap: Tap | None = None,
    *,
    stdio: tuple[int, int] | None = None,
    parent: int | None = None,
    seconds: float = EARLY_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Early:
    """Steps 1 to 3 of the module's docstring. ``stdio``: the client's two descriptors, when
    not this process's own; ``parent``: the editor's pid (gone: this ends)."""
    client_in, client_out = take_stdio() if stdio is None else stdio
    early = Early(client_in, client_out, codex=codex)
    _Relay(engine, codex, tap, early, parent).run(clock() + seconds, clock)
    return early


class _Relay:
    def __init__(
        self,
        engine: Engine,
        codex: CodexProcess | None,
        tap: Tap | None,
        early: Early,
        parent: int | None,
    ) -> None:
        self.engine, self.codex, self.tap, self.early, self.parent = (
            engine,
            codex,
            tap,
            early,
            parent,
        )
        self.client = b""
        self.written = 0
        #: The ids of the client's requests handled here and not answered yet.
        self.awaited: set[int | float | str] = set()
        self.handled = False
        #: Something this is not made for came: the shell takes it from here.
        self.done = False
        self.methods = EARLY_METHODS if codex is not None else frozenset({"initialize"})

    def to_client(self, effect: ToClient) -> None:
        self.written += _write_all(self.early.client_out, effect.data)
        if self.awaited:
            said = _peek(effect.data)
            if said.method is None:
                self.awaited.discard(_request_id(said))

    def to_codex(self, effect: ToCodex) -> None:
        assert self.codex is not None
        _write_all(self.codex.stdin, effect.data)

    def carry_out(self, effects: Any) -> None:
        send_codex = self.to_codex if self.codex is not None else None
        carry_out(effects, self.engine, self.tap, self.to_client, send_codex)

    def run(self, deadline: float, clock: Callable[[], float]) -> None:
        codex, early = self.codex, self.early
        try:
            if codex is not None:
                effects = self.engine.start()
                early.handshake_sent = True  # the engine has sent it, whatever the pipe did
                self.carry_out(effects)
            readers = [early.client_in]
            if codex is not None:
                readers += [codex.stdout, codex.stderr]
            while not self.done:
                # Without a Codex of its own, only what is there already: nothing to wait for.
                left = deadline - clock() if codex is not None else 0.0
                if left < 0 or (self.parent is not None and os.getppid() != self.parent):
                    return
                ready, _, _ = select.select(readers, [], [], min(left, _PARENT_POLL))
                for fd in ready:
                    data = os.read(fd, 256 * 1024)
                    if not data:  # a peer closed: the shell meets it and says so
                        self.done = True
                    elif fd == early.client_in:
                        self.client += data
                        self.client_messages()
                        self.done = self.done or len(self.client) > EARLY_HELD_BYTES
                    elif codex is not None and fd == codex.stdout:
                        codex.stdout_read += data
                        self.codex_messages()
                    elif codex is not None:
                        codex.stderr_read += data
                        self.done = self.done or len(codex.stderr_read) > EARLY_HELD_BYTES
                if codex is None or (self.handled and not self.awaited and not ready):
                    # Attached: one look. Else the client waits on nothing handled here.
                    return
        except OSError:
            return  # a side went away mid-write: what is left is the shell's to meet
        finally:
            early.received = self.client

    def client_messages(self) -> None:
        while b"\n" in self.client and not self.done:
            line, rest = self.client.split(b"\n", 1)
            message = line.strip()
            if message:
                said = _peek(message)
                if said.method not in self.methods or self.written >= EARLY_BYTES:
                    self.done = True  # this one and all after it are the shell's
                    return
                rid = _request_id(said)
                if rid is not None:
                    self.awaited.add(rid)
                self.handled = True
                if self.tap:
                    self.tap.message("from_client", message)
            self.client = rest
            if message:
                self.carry_out(self.engine.receive_client(message))

    def codex_messages(self) -> None:
        codex = self.codex
        assert codex is not None
        while b"\n" in codex.stdout_read and not self.done:
            line, codex.stdout_read = codex.stdout_read.split(b"\n", 1)
            message = line.strip()
            if message:
                if self.tap:
                    self.tap.message("from_codex", message)
                self.carry_out(self.engine.receive_codex(message))
        if len(codex.stdout_read) > EARLY_HELD_BYTES:
            self.done = True  # a message this large is the shell's, with its own bound


def _write_all(fd: int, data: bytes) -> int:
    line = data + b"\n"
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view) :]
    return len(line)
