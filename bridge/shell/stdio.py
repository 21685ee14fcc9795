"""ACP over this process's stdin and stdout, with stdout kept for protocol only."""

from __future__ import annotations

import os
import sys

import trio

from .streams import DEFAULT_MAX_MESSAGE, LineStream


def open_stdio_stream(max_message: int = DEFAULT_MAX_MESSAGE) -> LineStream:
    """A :class:`LineStream` on fds 0 and 1.

    The protocol gets private duplicates of stdin and stdout; fd 1 itself is
    then pointed at stderr, so that nothing else in the process (a stray
    ``print``, a library warning, a child process) can ever write a byte into
    the protocol stream.
    """
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return LineStream(
        trio.lowlevel.FdStream(protocol_in),
        trio.lowlevel.FdStream(protocol_out),
        max_message=max_message,
    )
