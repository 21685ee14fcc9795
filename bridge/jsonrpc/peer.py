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

Whatever the other end sends, :meth:`Peer.receive` returns and never raises:
msgspec recurses once per nesting level, so a message nested deeper than
:data:`MAX_DEPTH` is refused before msgspec (or whoever decodes ``params``
later) sees it, and examined by a scanner that does not recurse.
"""

from __future__ import annotations

import functools
import math
import re
from itertools import accumulate
from typing import Any, Final, Generic, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .errors import ErrorCode

# JSON-RPC allows any number or string as an id; a request's is echoed back as sent.
RequestId: TypeAlias = int | float | str
C = TypeVar("C")

#: Deepest nesting of arrays and objects accepted in a message. Real ACP and
#: Codex messages stay far below it (Codex's own JSON parser stops at 128);
#: it keeps every later decode of ``params`` well inside Python's recursion limit.
MAX_DEPTH: Final = 256

_EMPTY = Raw(b"")


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Envelope(msgspec.Struct):
    """Every member a JSON-RPC message may have; which are present tells its kind."""

    jsonrpc: str | UnsetType = UNSET
    id: RequestId | None | UnsetType = UNSET
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


# What :meth:`Peer.receive` returns, built for every message: frozen Structs, which are
# several times cheaper to build than frozen dataclasses (those set each field through
# ``object.__setattr__``).
class IncomingRequest(msgspec.Struct, frozen=True):
    id: RequestId
    method: str
    params: Raw


class IncomingNotification(msgspec.Struct, frozen=True):
    method: str
    params: Raw


class IncomingResponse(msgspec.Struct, Generic[C], frozen=True):
    id: RequestId
    context: C
    result: Raw


class IncomingError(msgspec.Struct, Generic[C], frozen=True):
    id: RequestId
    context: C
    error: ErrorObject


class Invalid(msgspec.Struct, frozen=True):
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
        if isinstance(data, str):
            # Lone surrogates become invalid UTF-8 (a parse error), not an exception.
            data = data.encode("utf-8", "surrogatepass")
        try:
            env = _decoder.decode(data)
        except msgspec.DecodeError as exc:
            parse_error = _parse_error(data)
            if parse_error is not None:
                message = f"Parse error: {parse_error}"
                return Invalid(message, self.error(None, ErrorCode.PARSE_ERROR, message))
            message = f"Invalid request: {exc}"
            return Invalid(message, self.error(None, ErrorCode.INVALID_REQUEST, message))
        except RecursionError:  # msgspec recurses once per level
            return self._receive_deep(data)
        # Valid JSON nests at most half its length deep: short messages (deltas) skip this.
        if len(data) > 2 * MAX_DEPTH and too_deep(data):
            return self._receive_deep(data)
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
            # Whoever waits on this request is told, never left waiting forever.
            why = f"response {env.id!r} has neither result nor error"
            return IncomingError(env.id, context, ErrorObject(int(ErrorCode.INTERNAL_ERROR), why))
        return IncomingResponse(env.id, context, env.result)

    def _invalid_request(self, env: _Envelope, why: str) -> Invalid:
        rid = env.id if isinstance(env.id, int | float | str) else None
        message = f"Invalid request: {why}"
        return Invalid(message, self.error(rid, ErrorCode.INVALID_REQUEST, message))

    def _receive_deep(self, data: bytes) -> Incoming:
        """A message nested deeper than :data:`MAX_DEPTH`: answered, never decoded.

        A request gets -32600 under its own id when that can be read; a response
        to a request of ours fails that request, so nothing waits forever.
        """
        scan = _scan(data)
        if scan is None:
            message = "Parse error: malformed JSON"
            return Invalid(message, self.error(None, ErrorCode.PARSE_ERROR, message))
        why = f"nested deeper than {MAX_DEPTH} levels"
        rid = _member_id(scan.get("id"))
        if "method" not in scan and rid is None and "error" in scan:
            return Invalid(f"error without request id {why}", None)  # as for a shallow one
        if "method" not in scan and rid is not None:
            if rid not in self.pending:
                return Invalid(f"response to unknown request id {rid!r} {why}", None)
            context = self.pending.pop(rid)
            error = ErrorObject(int(ErrorCode.INTERNAL_ERROR), f"response {why}")
            return IncomingError(rid, context, error)
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


def _parse_error(data: bytes) -> str | None:
    """Why ``data`` is malformed JSON (-32700), or ``None`` if it is valid JSON."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        return str(exc)
    except RecursionError:
        return None if _scan(data) is not None else "malformed JSON"
    return None


# -- messages nested too deep ------------------------------------------------------

# Keep only brackets, as +1 (open) and -1 (close) signed bytes.
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_OPENING = bytes(b for b in range(256) if b not in b"[{")


def too_deep(data: bytes) -> bool:
    """Whether ``data`` nests deeper than :data:`MAX_DEPTH`.

    Exact for valid JSON; for malformed JSON, never less than the depth msgspec
    reaches before its error (up to there, both see the same strings). Almost
    every message opens fewer brackets than that in all, which one C-speed pass
    shows (half the time of two ``count``s); only the others are measured, outside
    their strings.
    """
    if len(data.translate(None, _NOT_OPENING)) <= MAX_DEPTH:
        return False
    # Drop escaped backslashes and quotes; every quote left opens or closes a string.
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.split(b'"')[::2])
    steps = outside_strings.translate(_BRACKET_STEP, _NOT_BRACKET)
    return max(accumulate(memoryview(steps).cast("b")), default=0) > MAX_DEPTH


@functools.cache
def _token() -> re.Pattern[bytes]:
    """One token of JSON after optional whitespace; the group that matched says which kind.

    Compiled at the first message too deep to decode, not at import: 0.3 ms that the
    start (and its answer to ``initialize``) need not wait for."""
    return re.compile(
        rb"[ \t\n\r]*(?:"
        rb"([\[{])|([\]}])|(:)|(,)"
        rb'|("[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*")'
        rb"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
        rb")"
    )


_TRAILING_SPACE = re.compile(rb"[ \t\n\r]*\Z")
_OPEN, _CLOSE, _COLON, _COMMA, _STR, _SCALAR = range(1, 7)
# What the scanner expects next.
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON_NEXT, _COMMA_OR_CLOSE, _DONE = range(7)
#: In a scan, a top-level member whose value is an array or object.
_CONTAINER: Final = b""


def _scan(data: bytes) -> dict[str, bytes] | None:
    """Validate JSON of any depth without recursing.

    ``None`` if it is malformed; else the members of a top-level object, each
    as the bytes of its scalar value (:data:`_CONTAINER` for an array or
    object), or no members for any other JSON value. Linear in the input.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    stack = bytearray()  # the open brackets
    expect = _VALUE
    members: dict[str, bytes] = {}
    key: str | None = None  # the top-level member being read
    pos = 0
    match = _token().match
    while True:
        token = match(data, pos)
        if token is None:
            break
        pos = token.end()
        kind = token.lastindex
        text = token.group(kind) if kind is not None else b""
        if kind == _STR and expect in (_KEY, _KEY_OR_CLOSE):
            if len(stack) == 1:
                key = _member_name(text)
            expect = _COLON_NEXT
        elif kind in (_OPEN, _STR, _SCALAR) and expect in (_VALUE, _VALUE_OR_CLOSE):
            if kind == _SCALAR and _out_of_range(text):
                return None
            if len(stack) == 1 and key is not None:
                members[key] = _CONTAINER if kind == _OPEN else text
            if kind == _OPEN:
                stack.append(text[0])
                expect = _VALUE_OR_CLOSE if text == b"[" else _KEY_OR_CLOSE
            else:
                expect = _COMMA_OR_CLOSE if stack else _DONE
        elif kind == _CLOSE and stack and stack[-1] == (0x5B if text == b"]" else 0x7B):
            empty_ok = expect == (_VALUE_OR_CLOSE if text == b"]" else _KEY_OR_CLOSE)
            if expect != _COMMA_OR_CLOSE and not empty_ok:
                return None
            stack.pop()
            expect = _COMMA_OR_CLOSE if stack else _DONE
        elif kind == _COLON and expect == _COLON_NEXT:
            expect = _VALUE
        elif kind == _COMMA and expect == _COMMA_OR_CLOSE:
            expect = _KEY if stack[-1] == 0x7B else _VALUE
        else:
            return None
    if expect != _DONE or not _TRAILING_SPACE.match(data, pos):
        return None
    return members


def _out_of_range(text: bytes) -> bool:
    """A number msgspec refuses: one with a fraction or exponent beyond a double's range
    (integers of any size decode)."""
    if text[:1] in b"tfn" or not any(c in text for c in b".eE"):
        return False
    return math.isinf(float(text))


def _member_name(text: bytes) -> str | None:
    try:
        return msgspec.json.decode(text, type=str)
    except msgspec.DecodeError:
        return None  # e.g. an escaped lone surrogate: no member we look for


_ID = msgspec.json.Decoder(RequestId)


def _member_id(value: bytes | None) -> RequestId | None:
    """A scanned ``id`` member as a request id; ``None`` when absent or not one."""
    if not value:
        return None
    try:
        return _ID.decode(value)
    except msgspec.DecodeError:
        return None
