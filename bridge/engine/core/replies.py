"""What either router (the client's, Codex's) does alike: note the requests that arrive,
and take a message that is neither a request nor a notification: a peer's answer to
one of the engine's requests, its error, or something that is not JSON-RPC (answered,
when JSON-RPC says to, with ``reply``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias

from ...jsonrpc import IncomingError, IncomingResponse, RequestId
from .answers import Outstanding
from .hub import Hub

#: The requests that arrived with the message being handled, as ``(peer, id)``.
Arrived: TypeAlias = list[tuple[str, RequestId]]


class Router:
    """A peer's messages, each handed to what handles it.

    ``arrived``: the requests that arrived with the message being handled, as
    ``(peer, id)``: the engine answers them if what handles the message fails.
    """

    #: The peer, as ``arrived`` names it.
    peer: ClassVar[str]

    def __init__(self, hub: Hub, arrived: Arrived) -> None:
        self.hub = hub
        self._arrived = arrived

    def _arrive(self, rid: RequestId, open_requests: set[RequestId]) -> None:
        """Request ``rid`` arrived: open until answered, answered if its handling fails."""
        open_requests.add(rid)
        self._arrived.append((self.peer, rid))


def take_answer(
    msg: Any,
    *,
    on_result: Callable[[Outstanding, Any], None],
    send_raw: Callable[[bytes], None],
    peer: str,
    log: logging.Logger,
) -> None:
    """Take ``msg``, a response, an error or an invalid message from ``peer``: the
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
