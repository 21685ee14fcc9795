"""The one place an exception stops (rule 5 of :mod:`bridge.engine.engine`).

No input, from either side, makes the engine raise: a defect in a handler is logged
with its traceback, and every request that arrived with the message that met it and
is still unanswered, from either side, is answered -32603 (the engine cannot say how
far the handler got). The routers note each request as it arrives
(:attr:`Backstop.arrived`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...jsonrpc import ErrorCode, RequestId, RpcError
from . import AGENT_NAME
from .hub import Hub

log = logging.getLogger(__name__)


class Backstop:
    """Runs a message's handling, so that a defect in it is answered, never raised."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: Requests that arrived with the message being handled: ("client" | "codex", id).
        self.arrived: list[tuple[str, RequestId]] = []

    def run(self, handle: Callable[[bytes], None], data: bytes) -> None:
        """Run ``handle`` on ``data``; a defect in it is logged and answered."""
        self.arrived.clear()
        try:
            handle(data)
        except Exception:
            self.failed(data)

    def failed(self, data: bytes) -> None:
        """A handler failed on ``data``: log the traceback, and answer with -32603 every
        request that arrived with it and is still unanswered."""
        hub = self.hub
        log.exception("internal error handling %r", data[:200])
        message = f"{AGENT_NAME} internal error; see its log"
        for side, rid in self.arrived:
            if side == "client" and rid in hub.client.open_requests:
                hub.client.refuse(rid, RpcError.internal(message))
            elif side == "codex" and rid in hub.codex.open_requests:
                hub.codex.refuse(rid, ErrorCode.INTERNAL_ERROR, message)
