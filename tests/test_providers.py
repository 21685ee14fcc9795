"""ACP's unstable ``providers/*`` over Codex's model providers, at the engine: offered as the
unstable schema says (the agent advertises ``providers``, the client just calls), so a client
that declared nothing is answered, and told, too. Every answer is checked against the unstable schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from .support.acp_schema import ConversationValidator
from .support.proposals import Client

#: Codex 0.171's ``modelProvider/list``: one configured provider and its built-in OpenAI one.
LISTED = {
    "data": [
        {"id": "openai", "name": "OpenAI", "baseUrl": None},
        {"id": "mock", "name": "mock", "baseUrl": "http://127.0.0.1:9/v1"},
    ],
    "defaultProviderId": "mock",
}
SECOND = {"id": "second", "name": "second", "baseUrl": "http://127.0.0.1:8/v1"}

#: (ACP version, client capabilities, whether the answer advertises ``providers``).
CLIENTS = [
    pytest.param(1, {}, True, id="v1-declaring-nothing"),
    pytest.param(1, {"fs": {"readTextFile": True}, "terminal": True}, True, id="v1-stable"),
    pytest.param(1, {"subagents": {}}, True, id="v1-unstable"),
    pytest.param(2, {}, True, id="v2-declaring-nothing"),
]


def validate(h: Client) -> None:
    """Every message against the unstable schema of ``h``'s version (the methods are only
    there), and a v1 client's ``initialize`` answer against the stable one as well."""
    validator = ConversationValidator(version=h.version, unstable=True)
    for rid, method in h.sent.items():
        validator.client_sent({"id": rid, "method": method})
    for message in h.to_client:
        validator.agent_sent(message)
    if h.version == 1:
        stable = ConversationValidator(version=1)
        answered = h.client_response(h.init_id)
        assert answered is not None
        stable.client_sent({"id": h.init_id, "method": "initialize"})
        stable.agent_sent(answered)


def advertised(h: Client) -> Any:
    result = h.init
    caps = result["capabilities" if h.version == 2 else "agentCapabilities"]
    return caps.get("providers")


def answer(h: Client, method: str, params: Any, listed: Any = LISTED) -> dict[str, Any]:
    """``method`` asked, Codex's ``modelProvider/list`` answered with ``listed``: the answer."""
    rid = h.client_request(method, params)
    if listed is not None:
        h.codex_reply(h.codex_request("modelProvider/list")["id"], listed)
    response = h.client_response(rid)
    assert response is not None, f"{method} unanswered"
    return response


def in_use(result: dict[str, Any]) -> list[str]:
    return [p["providerId"] for p in result["providers"] if p["_meta"]["codex"]["inUse"]]


@pytest.mark.parametrize(("version", "capabilities", "told"), CLIENTS)
def test_every_client_is_answered_and_told(
    version: int, capabilities: dict[str, Any], told: bool
) -> None:
    h = Client(version, capabilities)
    assert advertised(h) == ({} if told else None)
    listed = answer(h, "providers/list", {})["result"]
    assert listed["providers"] == [
        {
            "providerId": "openai",
            "supported": ["openai"],
            "required": True,
            "_meta": {"codex": {"name": "OpenAI", "inUse": False}},
        },
        {
            "providerId": "mock",
            "supported": ["openai"],
            "required": True,
            "current": {"apiType": "openai", "baseUrl": "http://127.0.0.1:9/v1"},
            "_meta": {"codex": {"name": "mock", "inUse": True}},
        },
    ]
    validate(h)


@pytest.mark.parametrize("version", [1, 2])
def test_a_provider_set_without_declaring_anything_starts_the_next_sessions(version: int) -> None:
    h = Client(version, {})
    with_second = {**LISTED, "data": [*LISTED["data"], SECOND]}
    switch = {"providerId": "second", "apiType": "openai", "baseUrl": SECOND["baseUrl"]}
    assert answer(h, "providers/set", switch, with_second)["result"] == {}
    assert in_use(answer(h, "providers/list", {}, with_second)["result"]) == ["second"]
    h.new_session()
    assert h.codex_request("thread/start")["params"]["modelProvider"] == "second"

    refused = answer(h, "providers/disable", {"providerId": "mock"}, None)["error"]
    assert refused["code"] == -32602 and "required" in refused["message"]
    assert answer(h, "providers/disable", {"providerId": "second"}, None)["result"] == {}
    assert in_use(answer(h, "providers/list", {})["result"]) == ["mock"]
    validate(h)


def test_what_codex_cannot_do_is_refused_with_the_reason() -> None:
    h = Client(1, {})
    with_second = {**LISTED, "data": [*LISTED["data"], SECOND]}
    for bad, why in (
        ({"providerId": "elsewhere", "apiType": "openai", "baseUrl": "x"}, "no provider"),
        ({"providerId": "second", "apiType": "anthropic", "baseUrl": "x"}, "anthropic"),
        ({"providerId": "second", "apiType": "openai", "baseUrl": "http://x"}, "config.toml"),
    ):
        error = answer(h, "providers/set", bad, with_second)["error"]
        assert error["code"] == -32602 and why in error["message"], error
    h.new_session()
    assert "modelProvider" not in h.codex_request("thread/start")["params"]
    validate(h)


def test_a_codex_without_the_list_says_so() -> None:
    h = Client(1, {})
    rid = h.client_request("providers/list", {})
    h.codex_error(h.codex_request("modelProvider/list")["id"], "unknown method", code=-32601)
    error = h.error(rid)
    assert error.code == -32603 and "modelProvider/list" in error.message


def test_the_methods_survive_a_repeated_initialize_and_stay_advertised() -> None:
    h = Client(1, {"subagents": {}})
    again = h.result(
        h.client_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    )
    assert again["agentCapabilities"]["providers"] == {}
    assert len(answer(h, "providers/list", {})["result"]["providers"]) == 2
