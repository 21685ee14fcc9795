"""ACP's quotas proposal: the account's limits as pools of meters.

The "Quotas and Limits" RFD (agentclientprotocol/agent-client-protocol,
``docs/rfds/quotas-and-limits.mdx``, draft of 2026-10-06), not in the published schema
yet:

- the agent says ``quota: {}`` in its capabilities (v1 ``agentCapabilities``, v2
  ``capabilities``); the client, ``session.quota: {}`` in its own (v1's marker; this
  bridge asks a v2 client for it too, see bridge.engine.features.extensions._quotas);
- ``quota_update`` (a ``session/update``) carries a full snapshot ``{updatedAt, pools}``;
  ``quota/read {sessionId?}`` answers the same snapshot;
- a request refused for a spent limit fails with ``quotaExceeded``
  (:data:`QUOTA_EXCEEDED`, data ``{poolId?, meterId?, resetsAt?, retryAfter?}``).

A pool is ``{id, label?, state?, meters}``, a meter ``{id, label?, usedPercent?, window?,
resetsAt?, status?}`` (the proposal's ``used`` / ``limit`` / ``remaining`` amounts are
what Codex's windows do not have). Times are RFC 3339, windows ISO 8601 durations.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

#: The agent's and the client's capability (``quota`` / ``session.quota``).
CAPABILITY = "quota"

READ = "quota/read"

#: ``quotaExceeded``: the proposal's placeholder code until ACP assigns one.
QUOTA_EXCEEDED = -32003


class Meter(_Base):
    """One measure of a pool: here, one of Codex's usage windows (primary, secondary)."""

    id: str
    label: str | UnsetType = UNSET
    usedPercent: float | UnsetType = UNSET
    #: ISO 8601 duration (``PT5H``, ``P7D``).
    window: str | UnsetType = UNSET
    #: RFC 3339, UTC.
    resetsAt: str | UnsetType = UNSET
    #: ``ok`` | ``warning`` | ``exceeded``.
    status: str | UnsetType = UNSET


class Pool(_Base):
    """One limit the account runs under (Codex's ``limitId``), with its meters."""

    id: str
    meters: list[Meter]
    label: str | UnsetType = UNSET
    #: ``available`` | ``exhausted`` | ... (absent: not known).
    state: str | UnsetType = UNSET


class Snapshot(_Base):
    """``quota/read``'s answer."""

    updatedAt: str
    pools: list[Pool]


class QuotaUpdate(Snapshot, tag="quota_update", tag_field="sessionUpdate"):
    """The same snapshot, pushed on a session."""


class ReadQuotaParams(_Base):
    sessionId: str | None = None
