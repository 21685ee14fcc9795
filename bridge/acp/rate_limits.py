"""The rate-limits extension: the account's usage windows pushed to the client.

``_account/rate_limits_update {rateLimits}`` (a notification, nothing for the client to
ask), as the TypeScript Codex adapter defines it: one limit's complete picture
(``limitId``, ``limitName``, ``normalModelSlug``, ``primary`` / ``secondary`` windows
``{usedPercent, windowDurationMins, resetsAt}`` with ``resetsAt`` in Unix seconds,
``rateLimitReachedType``, ``planType``), names and units as Codex's ``RateLimitSnapshot``:
the Structs are Codex's own (:mod:`bridge.codex.palette`), filled in rather than sparse.
The agent says it pushes them with ``agentCapabilities._meta.rateLimits: {}``.
"""

from __future__ import annotations

from ..codex.palette import RateLimitSnapshot as RateLimits
from ..codex.palette import RateLimitsUpdated as RateLimitsUpdate
from ..codex.palette import RateLimitWindow as Window

METHOD = "_account/rate_limits_update"

#: ``agentCapabilities._meta`` member saying the agent pushes its usage windows.
CAPABILITY = "rateLimits"

__all__ = ["CAPABILITY", "METHOD", "RateLimits", "RateLimitsUpdate", "Window"]
