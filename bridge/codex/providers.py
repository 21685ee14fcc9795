"""Codex's model providers (0.171): ``modelProvider/list``.

Same conventions as :mod:`bridge.codex.types`.
"""

from __future__ import annotations

from typing import Any

from ..wire import WireStruct as _Base


class ModelProviderListParams(_Base):
    pass


class ModelProviderSummary(_Base):
    id: str
    name: str = ""
    #: ``None`` when Codex does not show it (its built-in OpenAI provider).
    baseUrl: str | None = None
    settings: dict[str, Any] | None = None


class ModelProviderListResult(_Base):
    data: list[ModelProviderSummary]
    defaultProviderId: str = ""
