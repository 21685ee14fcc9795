"""Protocol version negotiation for ``initialize``, as ACP v2's draft states it.

The agent answers with the highest version it supports at or below the one the
client asked for. A client asking for a version below every supported one gets
-32022 (``Unsupported protocol version``) with the versions the agent supports;
a ``protocolVersion`` that is no ``uint16`` is invalid params (-32602). The
official TypeScript SDK's ``agentProtocolRouter`` decides the same way, so a
client built on it and this bridge agree on every input.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Raw

from ..jsonrpc import RpcError

#: The versions this bridge speaks, lowest first.
SUPPORTED = (1, 2)

#: ACP's code for "no supported version at or below the one requested".
UNSUPPORTED_PROTOCOL_VERSION = -32022


class _VersionPeek(msgspec.Struct):
    protocolVersion: Any = msgspec.UNSET


_PEEK = msgspec.json.Decoder(_VersionPeek)


def negotiate(raw: Raw | bytes | None) -> int:
    """The version to speak, given ``initialize``'s raw params (see the module docstring)."""
    try:
        requested = _PEEK.decode(raw or b"null").protocolVersion
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise RpcError.invalid_params(f"Invalid params for initialize: {exc}") from None
    if requested is msgspec.UNSET:
        raise RpcError.invalid_params("Invalid params for initialize: protocolVersion is required")
    if type(requested) is not int or not 0 <= requested <= 0xFFFF:
        raise RpcError.invalid_params(
            "Invalid params for initialize: protocolVersion must be an integer from 0 to 65535, "
            f"got {requested!r}"
        )
    usable = [version for version in SUPPORTED if version <= requested]
    if not usable:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"requested": requested, "supported": list(SUPPORTED)},
        )
    return usable[-1]
