"""Feature: ACP's unstable ``providers/list|set|disable`` over Codex's configured providers.

Codex 0.171 lists its model providers (``modelProvider/list``: those of ``config.toml``
and its built-in ones, the default among them). Its ``modelProvider/default/set``
writes the choice into ``config.toml``, which this bridge never does; but
``thread/start`` takes a provider for the thread it starts (``modelProvider``), so the
choice is the bridge's, kept for this connection:

- ``providers/list``: each Codex provider, ``supported: ["openai"]`` (Codex speaks the
  Responses API), ``required: true`` (Codex cannot switch a configured provider off),
  ``current {apiType: "openai", baseUrl}`` when Codex shows its URL (its built-in OpenAI
  provider does not), ``_meta.codex {name, inUse}``: ``inUse`` on the one new sessions use.
- ``providers/set {providerId, apiType, baseUrl}``: a provider Codex has, with the protocol
  and URL it has (Codex's configuration is not rewritten: anything else is -32602 saying
  so), becomes the provider of the sessions started from then on (new sessions; a
  thread keeps the provider it started with).
- ``providers/disable {providerId}``: the provider chosen here is given up (new sessions
  take Codex's default again); any other is -32602 (``required``).

As the unstable schema has it, the agent advertises them (``agentCapabilities.providers:
{}``, v2 ``capabilities.providers``) and the client just calls them: nothing for a client to
declare. The methods are answered to every client, so every client is told, v1 and v2,
whatever else it declares (a client of the stable schema ignores a capability it does not
know).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Raw

from ....acp import providers as acp_providers
from ....codex import providers as codex_providers
from ....codex import types as codex_types
from ....jsonrpc import ErrorCode, RequestId, RpcError
from ...core import exchanges
from ...core.answers import decode_params, from_codex
from ...core.exchanges import Ask, Exchange, Refused, Steps
from ...core.hub import Hub, RequestHandler

LIST = "modelProvider/list"


class Providers:
    """``providers/list|set|disable`` over Codex's model providers (see the module docstring)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: The provider new threads start with, when the client chose one.
        self.chosen: str | None = None

    def advertise(self, caps: Any) -> None:
        """At ``initialize``: ``providers: {}``, to every client (it answers every one)."""
        caps.providers = {}

    def offer(self, table: dict[str, RequestHandler]) -> None:
        """Put the three methods in a face's request table (every client's)."""
        table.update(
            {
                "providers/list": self.list_providers,
                "providers/set": self.set_provider,
                "providers/disable": self.disable_provider,
            }
        )

    def thread_starting(self, start: codex_types.ThreadStartParams) -> None:
        if self.chosen is not None:
            start.modelProvider = self.chosen

    # -- the methods ---------------------------------------------------------------------

    def _codex_list(self, rid: RequestId) -> Steps[codex_providers.ModelProviderListResult | None]:
        """Codex's providers; ``None`` once its refusal answered client request ``rid``."""
        ask = Ask(
            LIST, codex_providers.ModelProviderListParams(), codex_providers.ModelProviderListResult
        )
        try:
            listed: codex_providers.ModelProviderListResult = yield ask
        except Refused as refused:
            error = refused.error
            if error.code == ErrorCode.METHOD_NOT_FOUND:
                why = RpcError.internal(f"this Codex has no {LIST} (Codex 0.171 or later has)")
                self.hub.client.refuse(rid, why)
            else:
                self.hub.client.refuse(rid, from_codex(error))
            return None
        return listed

    def list_providers(self, rid: RequestId, raw: Raw) -> None:
        exchanges.start(self.hub, self._list(rid))

    def _list(self, rid: RequestId) -> Exchange:
        result = yield from self._codex_list(rid)
        if result is not None:
            in_use = self.chosen or result.defaultProviderId
            infos = [
                acp_providers.ProviderInfo(
                    providerId=summary.id,
                    supported=[acp_providers.OPENAI],
                    required=True,
                    current=(
                        acp_providers.ProviderCurrentConfig(
                            apiType=acp_providers.OPENAI, baseUrl=summary.baseUrl
                        )
                        if summary.baseUrl
                        else UNSET
                    ),
                    meta={"codex": {"name": summary.name, "inUse": summary.id == in_use}},
                )
                for summary in result.data
            ]
            self.hub.client.answer(rid, acp_providers.ListProvidersResult(providers=infos))

    def set_provider(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_providers.SetProviderParams, "providers/set")
        exchanges.start(self.hub, self._set(rid, params))

    def _set(self, rid: RequestId, params: acp_providers.SetProviderParams) -> Exchange:
        result = yield from self._codex_list(rid)
        if result is not None:
            known = {summary.id: summary for summary in result.data}
            summary = known.get(params.providerId)
            why = None
            if summary is None:
                why = (
                    f"Codex has no provider {params.providerId!r} (configured: "
                    f"{', '.join(sorted(known))}); the bridge never writes config.toml"
                )
            elif params.apiType != acp_providers.OPENAI:
                why = f"Codex speaks {acp_providers.OPENAI!r} to its providers, not {params.apiType!r}"
            elif summary.baseUrl and summary.baseUrl != params.baseUrl:
                why = (
                    f"provider {params.providerId!r} is configured with {summary.baseUrl}; "
                    "the bridge never rewrites Codex's config.toml"
                )
            elif params.headers:
                why = "Codex takes a provider's headers from its config.toml only"
            if why is not None:
                self.hub.client.refuse(
                    rid,
                    RpcError.invalid_params(
                        f"providers/set: {why}", {"providerId": params.providerId}
                    ),
                )
                return
            self.chosen = params.providerId
            self.hub.client.answer(rid, acp_providers.Empty())

    def disable_provider(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, acp_providers.DisableProviderParams, "providers/disable")
        if params.providerId == self.chosen:
            self.chosen = None
            self.hub.client.answer(rid, acp_providers.Empty())
            return
        raise RpcError.invalid_params(
            f"providers/disable: {params.providerId!r} is required (Codex cannot switch a "
            "configured provider off; only the one chosen with providers/set can be given up)",
            {"providerId": params.providerId},
        )
