"""What either router does alike with a message that is neither a request nor a
notification: a peer's answer to one of the engine's requests, its error, or
something that is not JSON-RPC (answered, when JSON-RPC says to, with ``reply``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...jsonrpc import IncomingError, IncomingResponse
from .hub import Waiting


def settled(
    msg: Any,
    *,
    on_result: Callable[[Waiting, Any], None],
    send_raw: Callable[[bytes], None],
    peer: str,
    log: logging.Logger,
) -> None:
    """Settle ``msg``, a response, an error or an invalid message from ``peer``: the
    request it answers is given its result through ``on_result`` (the client's as it
    is, Codex's decoded to the type asked)."""
    if isinstance(msg, IncomingResponse):
        on_result(msg.context, msg.result)
    elif isinstance(msg, IncomingError):
        msg.context.on_error(msg.error)
    else:
        log.warning("%s sent an invalid message: %s", peer, msg.reason)
        if msg.reply is not None:
            send_raw(msg.reply)
