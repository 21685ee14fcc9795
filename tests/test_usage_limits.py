"""The rate-limits extension at the engine, as the TypeScript Codex adapter defines it: the agent
advertises ``_meta.rateLimits`` and pushes ``_account/rate_limits_update`` to every client, which
declares nothing. Every message is checked against the schema of the client's version."""

from __future__ import annotations

from typing import Any

import pytest

from .support.acp_schema import ConversationValidator
from .support.engine_harness import Harness
from .support.proposals import Client

RESETS = 1_800_000_000


def limits(used: float, **more: Any) -> dict[str, Any]:
    window = {"usedPercent": used, "windowDurationMins": 300, "resetsAt": RESETS}
    return {"rateLimits": {"limitId": "codex", "primary": window, **more}}


def pushed(h: Harness) -> list[dict[str, Any]]:
    return [
        m["params"]["rateLimits"]
        for m in h.to_client
        if m.get("method") == "_account/rate_limits_update"
    ]


def validate(h: Client) -> None:
    validator = ConversationValidator(version=h.version)
    for rid, method in h.sent.items():
        validator.client_sent({"id": rid, "method": method})
    for message in h.to_client:
        validator.agent_sent(message)


@pytest.mark.parametrize("version", [1, 2])
def test_a_client_declaring_nothing_is_told_and_pushed_each_change_merged(version: int) -> None:
    h = Client(version, {})
    caps = h.init["capabilities" if version == 2 else "agentCapabilities"]
    assert caps["_meta"] == {"rateLimits": {}}
    h.codex_notify("account/rateLimits/updated", limits(42, limitName="Codex", planType="plus"))
    h.codex_notify("account/rateLimits/updated", limits(42, limitName="Codex", planType="plus"))
    # Sparse: the next update names neither; the last picture's names carry forward.
    h.codex_notify("account/rateLimits/updated", limits(50))
    window = {"usedPercent": 50, "windowDurationMins": 300, "resetsAt": RESETS}
    assert [p["primary"]["usedPercent"] for p in pushed(h)] == [42, 50]  # the repeat: not sent
    assert pushed(h)[-1] == {
        "limitId": "codex",
        "limitName": "Codex",
        "normalModelSlug": None,
        "primary": window,
        "secondary": None,
        "rateLimitReachedType": None,
        "planType": "plus",
    }
    validate(h)


def test_nothing_is_pushed_before_the_client_initialized() -> None:
    h = Harness()
    h.codex_notify("account/rateLimits/updated", limits(42))
    assert pushed(h) == []
    h.client_request("initialize", {"protocolVersion": 1})
    h.codex_notify("account/rateLimits/updated", limits(43))
    assert [p["primary"]["usedPercent"] for p in pushed(h)] == [43]
