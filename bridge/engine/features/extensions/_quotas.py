"""Feature: ACP's quotas proposal (:mod:`bridge.acp.quota`), for a client that declared it.

Codex's usage windows (``account/rateLimits/updated``, merged per limit by
:mod:`bridge.engine.features.extensions._usage_limits`) are the pools: one per Codex limit
(``limitId``, ``limitName`` its label), meters ``primary`` / ``secondary`` (its
windows: ``usedPercent``, ``window`` from ``windowDurationMins``, ``resetsAt``;
``status: exceeded`` at 100%), the pool ``exhausted`` when Codex says the limit is
reached or a window is spent (otherwise its state is not known: Codex says windows
may not be read as availability).

- A client that declares ``session.quota: {}`` (v1 ``clientCapabilities``, v2
  ``capabilities``: the proposal asks it of v1 only, this bridge of both, so that a
  client that declares nothing is told nothing) is told ``quota: {}`` and offered
  ``quota/read``.
- Each change of the pools is pushed as ``quota_update`` to every root session the
  client is shown; ``quota/read`` asks Codex (``account/rateLimits/read``: every limit)
  and answers the same snapshot (what is known when Codex cannot say: ``pools: []``
  with no data at all).
- ``updatedAt`` is when the bridge learnt the data (the shell's clock, whole seconds),
  never less than the last one sent, and a millisecond more when the pools changed
  within the same one; a snapshot that did not change keeps its time.
- A turn Codex refuses for usage (``usageLimitExceeded``) fails with ``quotaExceeded``
  naming the spent meter and when it resets (Codex's own error data kept beside them),
  unless AIR's ``sessionFailure`` answered it already.
- ACP v1's prompt answer carries the TypeScript Codex adapter's ``_meta.quota
  {token_count, model_usage: [{model, token_count}]}``: despite its name, the tokens
  the prompt's turn used, the answer's ``usage`` in Codex's names (the thread's total at
  the end less the one before: Codex repeats a ``last`` unchanged, so a sum of them
  overcounts; ``null`` and ``[]`` when Codex reported none). v2 answers a prompt before
  its work: not sent.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from typing import Any, cast

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ....acp import air
from ....acp import quota as acp_quota
from ....acp import rate_limits as acp_rate_limits
from ....acp import types as acp_types
from ....codex import palette as codex_palette
from ....jsonrpc import RequestId, RpcError
from ...core import exchanges, facts
from ...core.answers import decode_params
from ...core.exchanges import Ask, Exchange, Later, Refused, Steps
from ...core.hub import Hub, RequestHandler
from ...views.stored_sessions import iso_time
from ._usage_limits import UsageLimits

log = logging.getLogger(__name__)


def declared(client_session: Any) -> bool:
    """The client's ``session`` capabilities hold ``quota: {}``."""
    return isinstance(client_session, dict) and isinstance(
        client_session.get(acp_quota.CAPABILITY), dict
    )


def duration(minutes: int) -> str:
    """Minutes as an ISO 8601 duration: ``PT5H``, ``P7D``, ``PT90M`` → ``PT1H30M``."""
    if minutes and minutes % (60 * 24) == 0:
        return f"P{minutes // (60 * 24)}D"
    hours, rest = divmod(minutes, 60)
    return "PT" + (f"{hours}H" if hours else "") + (f"{rest}M" if rest or not hours else "")


def _stamp(unix_ms: int) -> str:
    seconds, ms = divmod(unix_ms, 1000)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"


def _meter(name: str, window: acp_rate_limits.Window) -> acp_quota.Meter:
    return acp_quota.Meter(
        id=name,
        usedPercent=window.usedPercent,
        window=duration(window.windowDurationMins)
        if window.windowDurationMins is not None
        else UNSET,
        resetsAt=iso_time(window.resetsAt) if window.resetsAt is not None else UNSET,
        status="exceeded" if window.usedPercent >= 100 else UNSET,
    )


def pools(limits: dict[str, acp_rate_limits.RateLimits]) -> list[acp_quota.Pool]:
    """Codex's limits, as the proposal's pools (see the module docstring)."""
    found = []
    for limit_id, limit in limits.items():
        meters = [
            _meter(name, window)
            for name, window in (("primary", limit.primary), ("secondary", limit.secondary))
            if window is not None
        ]
        spent = limit.rateLimitReachedType is not None or any(
            meter.status == "exceeded" for meter in meters
        )
        found.append(
            acp_quota.Pool(
                id=limit_id,
                label=limit.limitName or UNSET,
                state="exhausted" if spent else UNSET,
                meters=meters,
            )
        )
    return found


class Quotas:
    def __init__(self, hub: Hub, usage_limits: UsageLimits) -> None:
        self.hub = hub
        self.usage_limits = usage_limits
        self.on = False
        #: The last snapshot sent (pushed or read), and its time in Unix milliseconds.
        self._sent: list[acp_quota.Pool] | None = None
        self._sent_ms = 0
        self._pushed: list[acp_quota.Pool] | None = None

    def advertise(
        self, caps: Any, client_session: Any, requests: dict[str, RequestHandler]
    ) -> None:
        """At ``initialize``: ``quota: {}`` and ``quota/read`` for a client that declared it."""
        self.on = declared(client_session)
        if self.on:
            caps.quota = {}
            requests[acp_quota.READ] = self.read

    # -- the snapshot ------------------------------------------------------------------

    def _stamped(self) -> Steps[acp_quota.Snapshot]:
        """The pools now and their time (see the module docstring): the clock is read when
        they changed since the last snapshot."""
        now = pools(self.usage_limits.limits)
        if now == self._sent:
            return acp_quota.Snapshot(updatedAt=_stamp(self._sent_ms), pools=now)
        unix_seconds = yield Later(self.hub.codex.ask_clock)
        current = pools(self.usage_limits.limits)
        ms = max(unix_seconds * 1000, self._sent_ms)
        if current != self._sent and ms == self._sent_ms and self._sent is not None:
            ms += 1  # equal times must mean equal pools
        self._sent, self._sent_ms = current, ms
        return acp_quota.Snapshot(updatedAt=_stamp(ms), pools=current)

    def changed(self) -> None:
        """Codex's windows changed: pushed to every root session the client is shown."""
        if self.on:
            exchanges.start(self.hub, self._pushed_now())

    def _pushed_now(self) -> Exchange:
        snapshot = yield from self._stamped()
        if snapshot.pools == self._pushed:
            return  # no identical consecutive snapshots
        self._pushed = snapshot.pools
        update = acp_quota.QuotaUpdate(updatedAt=snapshot.updatedAt, pools=snapshot.pools)
        for record in self.hub.threads.sessions():
            if record.parent_id is None:
                self.hub.client.update(record.id, update)

    def read(self, rid: RequestId, raw: Raw) -> None:
        """``quota/read {sessionId?}``: every limit Codex has, as one snapshot (the same
        for every session: Codex has one account)."""
        # Every member is optional: so are the params (absent or null).
        if not raw or bytes(raw) == b"null":
            raw = Raw(b"{}")
        params = decode_params(raw, acp_quota.ReadQuotaParams, acp_quota.READ)
        if params.sessionId is not None:
            self.hub.threads.require(params.sessionId)
        exchanges.start(self.hub, self._quota_read(rid))

    def _quota_read(self, rid: RequestId) -> Exchange:
        """Codex's usage windows read (and kept), then the snapshot stamped and answered."""
        try:
            read = yield Ask(
                "account/rateLimits/read", codex_palette.NoParams(), codex_palette.RateLimitsResult
            )
        except Refused as refused:
            # No usage windows for this account (an API key): what is known, maybe none.
            log.info("quota/read: Codex read no usage windows: %s", refused)
        else:
            snapshots = list((read.rateLimitsByLimitId or {}).values())
            if not snapshots and read.rateLimits is not None:
                snapshots = [read.rateLimits]
            for snapshot in snapshots:
                self.usage_limits.updated(codex_palette.RateLimitsUpdated(rateLimits=snapshot))
        self.hub.client.answer(rid, (yield from self._stamped()))

    # -- the prompt's answer ----------------------------------------------------------------

    def with_quota(self, fact: facts.PromptEnded) -> facts.PromptEnded:
        """The prompt's answer with the tokens its turn used (v1), or a turn refused for
        usage as ``quotaExceeded``."""
        result = fact.outcome
        if (
            self.on
            and self.hub.client.face.version == 1
            and isinstance(result, acp_types.PromptResult)
        ):
            tokens = _codex_counts(result.usage)
            settings = fact.record.settings
            model = settings.model if settings is not None else ""
            usage = [{"model": model, "token_count": tokens}] if tokens and model else []
            meta = result.meta if isinstance(result.meta, dict) else {}
            quota = {"token_count": tokens, "model_usage": usage}
            answer = msgspec.structs.replace(result, meta={**meta, "quota": quota})
            return dataclasses.replace(fact, outcome=answer)
        return self._refused(fact)

    def _refused(self, fact: facts.PromptEnded) -> facts.PromptEnded:
        """A turn refused for usage: ``quotaExceeded``."""
        error = fact.outcome
        if (
            not self.on
            or not isinstance(error, RpcError)
            or not isinstance(error.data, dict)
            or air.error_kind(error.data.get("codexErrorInfo")) != "usageLimitExceeded"
        ):
            return fact
        fields: dict[str, Any] = {}
        spent = self._spent()
        if spent is not None:
            pool, meter = spent
            fields = {"poolId": pool.id, "meterId": meter.id}
            if meter.resetsAt is not UNSET:
                fields["resetsAt"] = meter.resetsAt
        refused = RpcError(acp_quota.QUOTA_EXCEEDED, error.message, {**error.data, **fields})
        return dataclasses.replace(fact, outcome=refused)

    def _spent(self) -> tuple[acp_quota.Pool, acp_quota.Meter] | None:
        """The fullest meter Codex reported (the one that refused), with its pool."""
        found = [(pool, meter) for pool in pools(self.usage_limits.limits) for meter in pool.meters]
        if not found:
            return None
        return max(found, key=lambda pair: float(cast(float, pair[1].usedPercent)))


def _codex_counts(usage: acp_types.Usage | UnsetType) -> dict[str, int] | None:
    """A prompt's ``usage`` in Codex's names (``TokenUsageBreakdown``'s), as the
    TypeScript adapter's ``_meta.quota`` says them; ``None`` when Codex reported none."""
    if isinstance(usage, UnsetType):
        return None
    counts = {
        "totalTokens": usage.totalTokens,
        "inputTokens": usage.inputTokens,
        "cachedInputTokens": usage.cachedReadTokens,
        "outputTokens": usage.outputTokens,
        "reasoningOutputTokens": usage.thoughtTokens,
        "cacheWriteInputTokens": usage.cachedWriteTokens,
    }
    return {name: value for name, value in counts.items() if isinstance(value, int)}
