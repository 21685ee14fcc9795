"""One JSON-RPC 2.0 peer, without I/O, used for both the ACP and the Codex side.

:class:`Peer` turns bytes into typed incoming messages and outgoing calls into
bytes, and remembers which requests it is still waiting on. It never reads or
writes anything itself: the caller moves the bytes (see :mod:`bridge.shell`).
"""

from .errors import ErrorCode, RpcError
from .peer import (
    Incoming,
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    Invalid,
    Peer,
    RequestId,
)

__all__ = [
    "ErrorCode",
    "Incoming",
    "IncomingError",
    "IncomingNotification",
    "IncomingRequest",
    "IncomingResponse",
    "Invalid",
    "Peer",
    "RequestId",
    "RpcError",
]
