"""Feature: what the bridge offers at ``initialize`` beyond ACP's own surface.

Each extension is offered as its own definition says (``docs/mapping.md``, "Extensions:
advertised or declared"):

- advertised, nothing for the client to declare: the unstable schema's model providers'
  methods (:mod:`bridge.engine.features.extensions._providers`: the capability and the
  methods to every client), Codex's usage limits as the
  TypeScript Codex adapter's rate-limits extension pushes them
  (:mod:`bridge.engine.features.extensions._usage_limits`: to every client);
- on for a client that declares it, where the extension's definition has the client
  declare: JetBrains AIR's (``_meta.jetbrains.air``, :mod:`bridge.acp.air`, kept as
  ``hub.handshake.air``; AIR's async tasks, :mod:`bridge.engine.features.extensions._async_tasks`, and failure
  records among them), ACP's quotas proposal (``session.quota``,
  :mod:`bridge.engine.features.extensions._quotas`).

This feature builds those four, its parts, and the wiring routes Codex's messages to
them. The connection (:mod:`bridge.engine.core.connection`) asks this feature, for either
ACP version, what the answer offers and which methods the client's request table gains;
the latest ``initialize`` decides.
"""

from __future__ import annotations

from typing import Any, Protocol

from ....acp import air
from ....acp import quota as acp_quota
from ....codex import palette as codex_palette
from ...core.hub import Hub, RequestHandler
from ._async_tasks import AsyncTasks
from ._providers import Providers
from ._quotas import Quotas
from ._usage_limits import UsageLimits


class ListChanges(Protocol):
    """The session index's part of the answer (:mod:`bridge.engine.features.sessions.index`):
    the session-list proposal, declared among the ``session`` capabilities too."""

    def advertise(self, caps: Any, client_session: Any) -> None:
        """Offer ``list.changes`` in ``caps`` if ``client_session`` declared it."""


class Extensions:
    """What a client turns on at ``initialize`` (see the module docstring)."""

    def __init__(self, hub: Hub, list_changes: ListChanges) -> None:
        self.hub = hub
        self._list_changes = list_changes
        self.usage_limits = UsageLimits(hub)
        self.providers = Providers(hub)
        self.async_tasks = AsyncTasks(hub)
        self.quotas = Quotas(hub, self.usage_limits)

    def offer(self, caps: Any, requests: dict[str, RequestHandler], session: Any = None) -> None:
        """Fill the answer's capabilities ``caps`` and the client's request table with what
        is advertised and what the client declared (``session``: its ``session``
        capabilities; AIR's, read by the connection first: ``hub.handshake.air``)."""
        self.usage_limits.advertise(caps)
        self.quotas.advertise(caps, session, requests)
        self._list_changes.advertise(caps, session)
        self.providers.advertise(caps)
        self.providers.offer(requests)
        if self.async_tasks.on:
            requests[air.ASYNC_TASK_STOP] = self.async_tasks.stop

    def withdraw(self, requests: dict[str, RequestHandler]) -> None:
        """Take back from a table kept across ``initialize``s what an earlier one offered."""
        for method in (air.ASYNC_TASK_STOP, acp_quota.READ):
            requests.pop(method, None)

    def rate_limits_updated(self, note: codex_palette.RateLimitsUpdated) -> None:
        """``account/rateLimits/updated``: merged (and pushed), then as quotas."""
        if self.usage_limits.updated(note):
            self.quotas.changed()

    def advertised(self, meta: Any) -> Any:
        """The answer's ``_meta``, with AIR's extensions when the client is AIR."""
        return (
            air.advertised(meta, self.hub.handshake.air)
            if self.hub.handshake.air is not None
            else meta
        )
