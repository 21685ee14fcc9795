"""ACP over this process's stdin and stdout, with stdout kept for protocol only."""

from __future__ import annotations

import trio

from .early import take_stdio
from .streams import DEFAULT_MAX_MESSAGE, LineStream


def open_stdio_stream(
    max_message: int = DEFAULT_MAX_MESSAGE,
    *,
    fds: tuple[int, int] | None = None,
    received: bytes = b"",
) -> LineStream:
    """A :class:`LineStream` on the protocol's copies of fds 0 and 1 (:func:`take_stdio`'s,
    taken here unless ``fds`` are those already taken), its reader starting with
    ``received`` (bytes read before it and not handled yet)."""
    protocol_in, protocol_out = fds if fds is not None else take_stdio()
    return LineStream(
        trio.lowlevel.FdStream(protocol_in),
        trio.lowlevel.FdStream(protocol_out),
        max_message=max_message,
        received=received,
    )
