"""Codex's answers to the engine's requests, read once: each request waits as an
:class:`Outstanding` with the type its answer decodes into (a mismatch, or a defect in what
handles it, becomes an error that still reaches whoever waits); the decoders, built once per
type; a client's params decoded the same way; and what an error from Codex says."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import msgspec
from msgspec import Raw

from ...jsonrpc import ErrorCode, RequestId, RpcError
from ...jsonrpc.peer import ErrorObject
from . import AGENT_NAME

log = logging.getLogger(__name__)

T = TypeVar("T")

OnError: TypeAlias = Callable[[ErrorObject], None]
#: Called with Codex's answer, decoded.
OnResult: TypeAlias = Callable[[Any], None]


#: ``data`` member of the error a malformed Codex answer becomes (names the method).
MALFORMED = "malformedCodexAnswer"


def malformed(error: ErrorObject) -> bool:
    """Whether ``error`` is Codex's answer not fitting its type, not an error Codex sent."""
    return isinstance(error.data, dict) and MALFORMED in error.data


def unknown_method(error: ErrorObject) -> bool:
    """Whether Codex refused a request for its method: 0.169 answers an unknown method
    with -32600 "Invalid request: unknown variant `...`" (and "thread not found" with the
    same code, so the code alone does not tell)."""
    return error.code == ErrorCode.METHOD_NOT_FOUND or "unknown variant" in error.message


@dataclass(frozen=True, slots=True)
class Outstanding:
    """One of the engine's requests (to Codex or the client) whose answer has not come:
    what to do with the answer when it does."""

    method: str
    decoder: msgspec.json.Decoder[Any] | None
    on_result: Callable[[Any], None]
    on_error: OnError

    def result(self, raw: Raw) -> None:
        """Decode the result with the type the request named; a mismatch is an error.

        A defect in ``on_result`` is logged and turned into ``on_error``: whoever waits on
        the request (a client request, most often) is answered, never left waiting. The
        hub refuses a second answer to any request, so one ``on_result`` already gave
        stands."""
        if self.decoder is None:
            value: Any = raw
        else:
            try:
                value = self.decoder.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
                log.warning("Codex answered %s with a malformed result: %s", self.method, exc)
                self.on_error(
                    ErrorObject(
                        ErrorCode.INTERNAL_ERROR,
                        f"Codex answered {self.method} with a malformed result: {exc}",
                        {MALFORMED: self.method},
                    )
                )
                return
        try:
            self.on_result(value)
        except Exception:
            log.exception("internal error handling Codex's answer to %s", self.method)
            self.on_error(
                ErrorObject(
                    ErrorCode.INTERNAL_ERROR,
                    f"{AGENT_NAME} internal error handling Codex's answer to {self.method}; "
                    "see its log",
                    {MALFORMED: self.method},
                )
            )


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of ``kind``, built at its first use and kept."""
    found = _DECODERS.get(kind)
    if found is None:
        found = _DECODERS[kind] = msgspec.json.Decoder(kind)
    return found


def prepare_decoders(kinds: Iterable[Any]) -> None:
    """Build the decoders of these types now rather than at the first message of each
    (see ``Engine.prepare``)."""
    for kind in kinds:
        decoder(kind)


def decode_params(raw: Raw, kind: type[T], method: str) -> T:
    """Decode a client request's params; a mismatch is -32602 naming the field."""
    try:
        return decoder(kind).decode(raw or b"null")  # type: ignore[no-any-return]
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        detail = str(exc).replace("`$`", "`params`").replace("`$.", "`params.")
        raise RpcError.invalid_params(f"Invalid params for {method}: {detail}") from None


def from_codex(error: ErrorObject) -> RpcError:
    """A Codex JSON-RPC error, passed on to the client with Codex's own message."""
    return RpcError(ErrorCode.INTERNAL_ERROR, f"Codex: {error.message}", error.data)


def answering(open_requests: set[RequestId], rid: RequestId, side: str) -> bool:
    """Take ``rid`` off ``side``'s requests still to answer: ``False`` (and logged) when it
    was answered already, or never received. Every request is answered at most once."""
    try:
        open_requests.remove(rid)
    except KeyError:
        log.error("not answering %s request %r twice (or one it never made)", side, rid)
        return False
    return True
