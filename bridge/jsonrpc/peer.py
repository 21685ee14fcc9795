"""A sans-I/O JSON-RPC 2.0 peer.

A :class:`Peer` is one end of a JSON-RPC conversation. Feed it each message
the other end sent with :meth:`Peer.receive` and get back what it was: a
request, a notification, a response (with the *context* you attached when you
sent the request), or :class:`Invalid` (the other end broke the protocol; the
``reply`` is what to answer, if anything). Ask it for the bytes of what you
want to send with :meth:`Peer.request`, :meth:`Peer.notification`,
:meth:`Peer.response` and :meth:`Peer.error`.

The peer allocates request ids itself, from 0 upwards, so a replayed
conversation gets the same ids as the recorded one. ``params`` and ``result``
stay :class:`msgspec.Raw` until the caller decodes them with the type it
expects, so a message is parsed once and never walked twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .errors import ErrorCode

RequestId: TypeAlias = int | str
C = TypeVar("C")

_EMPTY = Raw(b"")


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Envelope(msgspec.Struct):
    """Every member a JSON-RPC message may have; which are present tells its kind."""

    jsonrpc: str | UnsetType = UNSET
    id: int | str | None | UnsetType = UNSET
    method: str | UnsetType = UNSET
    params: Raw = _EMPTY
    result: Raw = _EMPTY
    error: ErrorObject | UnsetType = UNSET


# Outgoing envelopes; ``jsonrpc`` first so a line reads naturally in a log.
class _OutRequest(msgspec.Struct, omit_defaults=True, kw_only=True):
    jsonrpc: str | UnsetType = UNSET
    id: RequestId
    method: str
    params: Any = UNSET


class _OutNotification(msgspec.Struct, omit_defaults=True, kw_only=True):
    jsonrpc: str | UnsetType = UNSET
    method: str
    params: Any = UNSET


class _OutResult(msgspec.Struct, omit_defaults=True, kw_only=True):
    jsonrpc: str | UnsetType = UNSET
    id: RequestId
    result: Any


class _OutError(msgspec.Struct, omit_defaults=True, kw_only=True):
    jsonrpc: str | UnsetType = UNSET
    id: RequestId | None
    error: ErrorObject


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    id: RequestId
    method: str
    params: Raw


@dataclass(frozen=True, slots=True)
class IncomingNotification:
    method: str
    params: Raw


@dataclass(frozen=True, slots=True)
class IncomingResponse(Generic[C]):
    id: RequestId
    context: C
    result: Raw


@dataclass(frozen=True, slots=True)
class IncomingError(Generic[C]):
    id: RequestId
    context: C
    error: ErrorObject


@dataclass(frozen=True, slots=True)
class Invalid:
    """The other end sent something that is not valid JSON-RPC.

    ``reply`` is the error response to send back (``None`` when JSON-RPC says
    not to answer, e.g. a response to a request we never made).
    """

    reason: str
    reply: bytes | None


Incoming: TypeAlias = (
    IncomingRequest | IncomingNotification | IncomingResponse[Any] | IncomingError[Any] | Invalid
)

_decoder = msgspec.json.Decoder(_Envelope)


class Peer(Generic[C]):
    """One end of a JSON-RPC 2.0 connection, with no I/O.

    ``jsonrpc_member`` says whether to write ``"jsonrpc": "2.0"`` into what we
    send (ACP requires it; Codex's app-server leaves it out and accepts both).
    Received messages are accepted either way.
    """

    def __init__(self, *, jsonrpc_member: bool = True) -> None:
        self._version: str | UnsetType = "2.0" if jsonrpc_member else UNSET
        self._encoder = msgspec.json.Encoder()
        self._next_id = 0
        self.pending: dict[RequestId, C] = {}

    # -- receiving -------------------------------------------------------

    def receive(self, data: bytes | str) -> Incoming:
        """Classify one complete message received from the other end."""
        try:
            env = _decoder.decode(data)
        except msgspec.DecodeError as exc:
            kind = "Parse error" if _is_json_error(data) else "Invalid request"
            code = ErrorCode.PARSE_ERROR if kind == "Parse error" else ErrorCode.INVALID_REQUEST
            return Invalid(f"{kind}: {exc}", self.error(None, code, f"{kind}: {exc}"))
        if env.jsonrpc is not UNSET and env.jsonrpc != "2.0":
            return self._invalid_request(env, f"unsupported jsonrpc version {env.jsonrpc!r}")
        if env.method is not UNSET:
            if env.id is UNSET:
                return IncomingNotification(env.method, env.params)
            if env.id is None:
                return self._invalid_request(env, "request id must not be null")
            return IncomingRequest(env.id, env.method, env.params)
        if env.id is UNSET or env.id is None:
            if env.error is not UNSET:
                # An error about something we sent that it could not even parse.
                return Invalid(f"error without request id: {env.error.message}", None)
            return self._invalid_request(env, "message has neither method nor id")
        if env.id not in self.pending:
            return Invalid(f"response to unknown request id {env.id!r}", None)
        context = self.pending.pop(env.id)
        if env.error is not UNSET:
            return IncomingError(env.id, context, env.error)
        if not env.result:
            return Invalid(f"response {env.id!r} has neither result nor error", None)
        return IncomingResponse(env.id, context, env.result)

    def _invalid_request(self, env: _Envelope, why: str) -> Invalid:
        rid = env.id if isinstance(env.id, int | str) else None
        message = f"Invalid request: {why}"
        return Invalid(message, self.error(rid, ErrorCode.INVALID_REQUEST, message))

    # -- sending ---------------------------------------------------------

    def request(self, method: str, params: Any, context: C) -> tuple[RequestId, bytes]:
        """Bytes of a new request; ``context`` comes back with its response."""
        rid = self._next_id
        self._next_id += 1
        self.pending[rid] = context
        return rid, self._encoder.encode(
            _OutRequest(jsonrpc=self._version, id=rid, method=method, params=params)
        )

    def notification(self, method: str, params: Any = UNSET) -> bytes:
        """Bytes of a notification; leave ``params`` out for one without any."""
        return self._encoder.encode(
            _OutNotification(jsonrpc=self._version, method=method, params=params)
        )

    def response(self, request_id: RequestId, result: Any) -> bytes:
        return self._encoder.encode(_OutResult(jsonrpc=self._version, id=request_id, result=result))

    def error(
        self, request_id: RequestId | None, code: int, message: str, data: Any = None
    ) -> bytes:
        error = ErrorObject(int(code), message, data)
        return self._encoder.encode(_OutError(jsonrpc=self._version, id=request_id, error=error))

    def abandon_pending(self) -> list[tuple[RequestId, C]]:
        """Forget every request still waiting for an answer and return them.

        Used when the other end is gone: the caller fails each one explicitly
        instead of letting it wait forever.
        """
        lost = list(self.pending.items())
        self.pending.clear()
        return lost


def _is_json_error(data: bytes | str) -> bool:
    """Tell malformed JSON (-32700) from valid JSON of the wrong shape (-32600)."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return True
    return False
