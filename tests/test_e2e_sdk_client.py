"""The official ACP TypeScript SDK (@agentclientprotocol/sdk 2.4.0) as the client."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from tests.conftest import REPO
from tests.support.acp_schema import ConversationValidator
from tests.support.e2e import run_sdk_driver, words
from tests.support.reading import Ended, session_updates, text_of

pytestmark = pytest.mark.e2e

SdkDriver = Callable[..., Awaitable[list[Any]]]

SDK_CLIENT = REPO / "tools" / "node" / "acp_sdk_client.mjs"


@pytest.fixture
def sdk_client(node: str, bridge_env: dict[str, str], workspace: Path) -> SdkDriver:
    """``events = await sdk_client(*args)``: the driver run in the workspace with ``args``."""
    return functools.partial(_run_sdk_client, node, bridge_env, workspace)


async def _run_sdk_client(
    node: str, env: dict[str, str], workspace: Path, *args: str
) -> list[dict[str, object]]:
    result, events = await run_sdk_driver(node, SDK_CLIENT, env, "--cwd", str(workspace), *args)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert not [
        e for e in events if e["event"] in ("sdk_rejected", "timeout", "connection_closed")
    ], events
    return events


def _validate_events(events: list[dict[str, object]], *, unstable: bool = False) -> None:
    """Re-check the raw payloads against the ACP schema (``unstable``: its unstable one),
    method by method."""
    v = ConversationValidator(unstable=unstable)
    for n, e in enumerate(events):
        if e["event"] == "response":
            v.client_sent({"id": n, "method": e["method"]})
            v.agent_sent({"jsonrpc": "2.0", "id": n, "result": e["result"]})
        elif e["event"] == "notification":
            v.agent_sent({"jsonrpc": "2.0", "method": e["method"], "params": e["params"]})


async def test_sdk_client_streams_a_whole_answer(sdk_client: SdkDriver) -> None:
    events = await sdk_client("--prompt", "@@ words 500", "--prompt", "@@ say bye")
    kinds = [(e["event"], e.get("method")) for e in events]
    assert kinds[0] == ("response", "initialize") and kinds[1] == ("response", "session/new")
    prompts = [e for e in events if e.get("method") == "session/prompt"]
    assert [p["result"] for p in prompts] == [Ended({"stopReason": "end_turn"})] * 2
    first_end = events.index(prompts[0])
    assert text_of(u["update"] for u in session_updates(events[:first_end])) == words(500)
    # The usage windows pushed beside (an extension notification) are taken, not refused.
    assert not [e for e in events if e["event"] == "sdk_rejected"]
    assert events[-1] == {"event": "exit", "code": 0}
    _validate_events(events)


async def test_sdk_client_cancels_mid_stream(sdk_client: SdkDriver) -> None:
    events = await sdk_client(
        "--prompt", "@@ words 3000 delay_ms=10", "--cancel-after-chunks", "10"
    )
    assert any(e["event"] == "cancel_sent" for e in events)
    [prompt] = [e for e in events if e.get("method") == "session/prompt"]
    assert prompt["result"] == Ended({"stopReason": "cancelled"})
    chunks = [
        u for u in session_updates(events) if u["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert 10 <= len(chunks) < 3000
    _validate_events(events)


async def test_sdk_unstable_client_switches_provider_and_the_next_session_uses_it(
    sdk_client: SdkDriver,
    nursery: trio.Nursery,
    scripted_model: ScriptedModel,
    codex_home: Path,
) -> None:
    """The SDK's unstable entry point, declaring nothing, drives providers/list and
    providers/set (its own schema checks the answers), then the session it opens runs on
    the provider it set. Declaring nothing, it is told of them all the same."""
    second: ScriptedModel = await nursery.start(serve_scripted_model)
    provider = (
        f'[model_providers.second]\nname = "second"\nbase_url = "{second.base_url}"\n'
        'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
        "supports_websockets = false\n"
    )
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=provider)
    switch = {"providerId": "second", "apiType": "openai", "baseUrl": second.base_url}
    events = await sdk_client(
        "--unstable",
        "--request",
        "providers/list",
        "{}",
        "--request",
        "providers/set",
        json.dumps(switch),
        "--prompt",
        "@@ say from the second provider",
    )
    responses = {e["method"]: e for e in events if e["event"] == "response"}
    assert responses["initialize"]["result"]["agentCapabilities"]["providers"] == {}
    listed = responses["providers/list"]["result"]["providers"]
    assert {p["providerId"] for p in listed} >= {"mock", "second"}
    assert responses["providers/set"]["result"] == {}
    assert responses["session/prompt"]["result"] == Ended({"stopReason": "end_turn"})
    assert any("from the second provider" in json.dumps(body) for body in second.requests)
    assert not any("from the second provider" in json.dumps(b) for b in scripted_model.requests)
    assert events[-1] == {"event": "exit", "code": 0}
    _validate_events(events, unstable=True)
