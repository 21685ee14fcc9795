"""Feature: usage limits, pushed to every client; AIR's failure records, for a client that
asked for them.

Codex reports the account's usage windows as they change (``account/rateLimits/updated``,
read from the model provider's response headers during turns), and refuses a turn
once a window is spent (the turn fails with ``codexErrorInfo: usageLimitExceeded``,
whose message says when to try again but carries no time).

- Every client is told ``agentCapabilities._meta.rateLimits: {}`` (v2:
  ``capabilities._meta``) and, once it has initialized, pushed ``_account/rate_limits_update``
  (:mod:`bridge.acp.rate_limits`) for each change, as the TypeScript Codex adapter's
  rate-limits extension defines it: the agent advertises the push, the client declares
  and asks nothing (an extension notification a client does not know, it ignores).
  Codex's update is sparse, so it is merged into the last snapshot of its limit
  (``limitId``, ``"codex"`` when unnamed: the windows as reported, the account's names
  carried forward), and an update that changes nothing is not sent.
- A client that declared AIR's ``sessionFailure`` gets a failed turn as AIR's typed
  record (ACP v2: in a ``session_info_update`` before the work's end, which stays as v2
  says it): the prompt answers ``end_turn`` with ``_meta.jetbrains.air.sessionFailure``
  (category and actions by Codex's error, :func:`bridge.acp.air.failure_record`); a
  limit's record names when the spent window resets (``details``), from the windows
  Codex reported. A missing sign-in stays ACP's ``auth_required`` error.

"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from ....acp import air
from ....acp import rate_limits as acp_rate_limits
from ....acp import tools as acp_tools
from ....acp import types as acp_types
from ....codex import palette as codex_palette
from ....jsonrpc import ErrorCode, RpcError
from ...core import facts
from ...core.hub import Hub

#: The account's ordinary limit, when Codex does not name one.
DEFAULT_LIMIT = "codex"


def _window(window: codex_palette.RateLimitWindow | None) -> acp_rate_limits.Window | None:
    if window is None:
        return None
    return acp_rate_limits.Window(
        usedPercent=window.usedPercent,
        windowDurationMins=window.windowDurationMins,
        resetsAt=window.resetsAt,
    )


class UsageLimits:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        #: The last complete picture of each limit, as pushed.
        self._limits: dict[str, acp_rate_limits.RateLimits] = {}
        #: The client has initialized: it is told of the windows.
        self.pushed = False

    @property
    def limits(self) -> dict[str, acp_rate_limits.RateLimits]:
        """Each limit's last complete picture, by ``limitId`` (read-only)."""
        return self._limits

    def advertise(self, caps: Any) -> None:
        """At ``initialize``: the push, said in the agent's capabilities (v1's or v2's: both
        have ``_meta``), and on from now."""
        self.pushed = True
        existing = caps.meta if isinstance(caps.meta, dict) else {}
        caps.meta = {**existing, acp_rate_limits.CAPABILITY: {}}

    def updated(self, note: codex_palette.RateLimitsUpdated) -> bool:
        """``account/rateLimits/updated``: merged, and pushed when it changed anything
        (whether it did)."""
        snapshot = note.rateLimits
        limit_id = snapshot.limitId or DEFAULT_LIMIT
        last = self._limits.get(limit_id)
        merged = acp_rate_limits.RateLimits(
            limitId=limit_id,
            limitName=snapshot.limitName or (last.limitName if last else None),
            normalModelSlug=snapshot.normalModelSlug or (last.normalModelSlug if last else None),
            primary=_window(snapshot.primary),
            secondary=_window(snapshot.secondary),
            rateLimitReachedType=snapshot.rateLimitReachedType,
            planType=snapshot.planType or (last.planType if last else None),
        )
        if merged == last:
            return False
        self._limits[limit_id] = merged
        if self.pushed:
            self.hub.client.notify(
                acp_rate_limits.METHOD, acp_rate_limits.RateLimitsUpdate(rateLimits=merged)
            )
        return True

    # -- a failed turn, as AIR's record ----------------------------------------------------

    def record_failure(self, fact: facts.PromptEnded) -> facts.PromptEnded:
        """A failed turn's error as AIR's ``sessionFailure``, if declared: v1's answer is
        ``end_turn`` carrying it (returned); in v2 it is sent on the session's stream now."""
        declared = self.hub.handshake.air
        error = fact.outcome
        if (
            declared is None
            or air.SESSION_FAILURE not in declared
            or not isinstance(error, RpcError)
            or error.code == ErrorCode.AUTH_REQUIRED
            or not isinstance(error.data, dict)
            or "turnId" not in error.data
        ):
            return fact
        info = error.data.get("codexErrorInfo")
        details = None
        if air.error_kind(info) in ("usageLimitExceeded", "rateLimitExceeded"):
            details = self._resets()
        record = air.failure_record(f"{error.data['turnId']}:error", info, error.message, details)
        if self.hub.client.face.version == 2:
            # v2 answered the prompt when it was inserted: the record goes on the session's
            # stream, before the state that ends the work says how.
            update = acp_tools.SessionInfoUpdate(meta=air.meta({air.SESSION_FAILURE: record}))
            self.hub.client.update(fact.record.id, update)
            return fact
        result = acp_types.PromptResult(
            stopReason="end_turn", meta=air.meta({air.SESSION_FAILURE: record})
        )
        return dataclasses.replace(fact, outcome=result)

    def _resets(self) -> str | None:
        """When the spent window (the fullest one Codex reported) resets, in words."""
        windows = [
            window
            for limit in self._limits.values()
            for window in (limit.primary, limit.secondary)
            if window is not None and window.resetsAt is not None
        ]
        if not windows:
            return None
        fullest = max(windows, key=lambda window: window.usedPercent)
        assert fullest.resetsAt is not None
        when = datetime.fromtimestamp(fullest.resetsAt, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"The usage limit resets at {when}."
