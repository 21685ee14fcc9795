"""JSON-RPC error codes, and the exception that carries one."""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.IntEnum):
    """Codes from JSON-RPC 2.0 and the ones ACP adds in the server-error range."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """An error to answer a request with.

    Raised inside request handlers; the code turns into the ``error`` member of
    the response, so a handler never builds error envelopes by hand.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.INVALID_PARAMS, message, data)

    @classmethod
    def not_found(cls, message: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.RESOURCE_NOT_FOUND, message, data)

    @classmethod
    def internal(cls, message: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.INTERNAL_ERROR, message, data)

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r})"
