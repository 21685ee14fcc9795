"""ACP's unstable provider methods: ``providers/list``, ``providers/set``, ``providers/disable``
(the same in v1 and v2).

Same conventions as :mod:`bridge.acp.types`.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import Meta

#: The one protocol Codex speaks to a provider (the Responses API): ACP's ``openai``.
OPENAI = "openai"


class ProviderCurrentConfig(_Base):
    apiType: str
    baseUrl: str


class ProviderInfo(_Base):
    providerId: str
    supported: list[str]
    required: bool
    current: ProviderCurrentConfig | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ListProvidersResult(_Base):
    providers: list[ProviderInfo]


class SetProviderParams(_Base):
    providerId: str
    apiType: str
    baseUrl: str
    headers: dict[str, str] | None = None


class DisableProviderParams(_Base):
    providerId: str


class Empty(_Base):
    pass
