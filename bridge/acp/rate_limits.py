"""The rate-limits extension: the account's usage windows pushed to the client.

``_account/rate_limits_update {rateLimits}`` (a notification, nothing for the client to
ask), as the TypeScript Codex adapter defines it: one limit's complete picture
(``limitId``, ``limitName``, ``normalModelSlug``, ``primary`` / ``secondary`` windows
``{usedPercent, windowDurationMins, resetsAt}`` with ``resetsAt`` in Unix seconds,
``rateLimitReachedType``, ``planType``), names and units as Codex's ``RateLimitSnapshot``.
The agent says it pushes them with ``agentCapabilities._meta.rateLimits: {}``.
"""

from __future__ import annotations

from ..codex.palette import RateLimitWindow as Window
from ..wire import WireStruct as _Base

METHOD = "_account/rate_limits_update"

#: ``agentCapabilities._meta`` member saying the agent pushes its usage windows.
CAPABILITY = "rateLimits"

__all__ = ["CAPABILITY", "METHOD", "RateLimits", "RateLimitsUpdate", "Window"]


class RateLimits(_Base, omit_defaults=False):
    limitId: str
    limitName: str | None = None
    normalModelSlug: str | None = None
    primary: Window | None = None
    secondary: Window | None = None
    rateLimitReachedType: str | None = None
    planType: str | None = None


class RateLimitsUpdate(_Base):
    rateLimits: RateLimits
