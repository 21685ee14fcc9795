"""Deleting a session and signing out in ACP v1, and the sign-in state, against the real Codex.

A deleted session is gone from the list and cannot be loaded or prompted, here and in another
window on the daemon's Codex, whose running prompt is answered ``cancelled``. Signing out makes
the sign-in state ``unauthenticated`` (the client is told, and can ask) and a prompt fail with
``auth_required``; the model here refuses a request that carries no key, as OpenAI's does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, OpenConversation
from tests.support.loopback import refuse_for_lack_of_a_key, request_head, serve_loopback
from tests.support.reading import Ended

pytestmark = pytest.mark.e2e

NOT_FOUND = -32002
AUTH_REQUIRED = -32000


async def _listed(talk: Any) -> list[str]:
    listed = await talk.client.request("session/list", {})
    return [row["sessionId"] for row in listed["sessions"]]


async def test_a_deleted_session_is_no_longer_listed_loaded_or_prompted(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert talk.init["agentCapabilities"]["sessionCapabilities"]["delete"] == {}
            await talk.said("@@ say remember me")
            assert talk.sid in await _listed(talk)
            assert await talk.client.request("session/delete", {"sessionId": talk.sid}) == {}
            assert talk.sid not in await _listed(talk)
            with pytest.raises(RpcError) as load:
                await talk.client.request(
                    "session/load", {"sessionId": talk.sid, "cwd": str(workspace), "mcpServers": []}
                )
            assert load.value.code == NOT_FOUND and talk.sid in load.value.message
            with pytest.raises(RpcError) as prompted:
                await talk.prompt("@@ say still there?")
            assert prompted.value.code == NOT_FOUND
            with pytest.raises(RpcError) as again:
                await talk.client.request("session/delete", {"sessionId": talk.sid})
            assert again.value.code == NOT_FOUND and talk.sid in again.value.message


@pytest.mark.transports("daemon")
async def test_a_session_deleted_in_one_window_ends_its_work_and_is_gone_in_the_other(
    open_conversation: OpenConversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as first, open_conversation(session=False) as second:
            await first.said("@@ say shared")
            await second.client.request(
                "session/load", {"sessionId": first.sid, "cwd": str(workspace), "mcpServers": []}
            )
            second.sid = first.sid
            answers: list[Any] = []

            async def long_prompt() -> None:
                answers.append(await second.prompt("@@ sleep 20000\n@@ say too late"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_prompt)
                await scripted_model.wait_until(lambda m: len(m.requests) >= 2)
                assert await first.client.request("session/delete", {"sessionId": first.sid}) == {}
            # The other window's prompt ended when Codex stopped the deleted thread's turn.
            assert answers == [Ended({"stopReason": "cancelled"})]
            for window in (first, second):
                with pytest.raises(RpcError) as prompted:
                    await window.prompt("@@ say anyone?")
                assert prompted.value.code == NOT_FOUND
                assert first.sid not in await _listed(window)


async def _refuse_without_a_key(upstream: int, stream: trio.SocketStream) -> None:
    """OpenAI's manner: a request without an ``Authorization`` header is refused 401; one
    with it goes on to the scripted model (on ``upstream``), byte for byte both ways."""
    data = await request_head(stream)
    if data is None:
        return
    head = data.split(b"\r\n\r\n", 1)[0].lower()
    if b"\r\nauthorization:" not in head:
        await refuse_for_lack_of_a_key(stream)
        return
    model = await trio.open_tcp_stream("127.0.0.1", upstream)

    async def pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while chunk := await source.receive_some(65536):
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    await model.send_all(data)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipe, stream, model)
        nursery.start_soon(pipe, model, stream)


async def test_logout_signs_codex_out_and_the_client_is_told(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
    codex_home: Path,
    nursery: trio.Nursery,
) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await _refuse_without_a_key(scripted_model.port, stream)

    port = await serve_loopback(nursery, handler)
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml=f'[model_providers.mock]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        "requires_openai_auth = true",
    )
    bridge_env.pop("CODEX_API_KEY", None)
    bridge_env["OPENAI_API_KEY"] = "sk-bridge-test-key"
    told: list[dict[str, Any]] = []
    told_changed = trio.Event()

    def on_notification(method: str, params: Any) -> None:
        nonlocal told_changed
        if method == "auth/status_update":
            told.append(params)
            told_changed.set()
            told_changed = trio.Event()

    async def told_state(state: str) -> None:
        while not told or told[-1]["state"] != state:
            await told_changed.wait()

    # A client of the unstable schema (it declares sub-agents) is offered the sign-in state.
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(
            capabilities={"subagents": {}}, on_notification=on_notification, unstable=True
        ) as talk:
            assert talk.init["agentCapabilities"]["auth"] == {"logout": {}, "status": {}}
            status = talk.client.request
            assert await status("auth/status", {}) == {"state": "unauthenticated"}
            assert await talk.client.request("authenticate", {"methodId": "api-key"}) == {}
            signed_in = {
                "state": "authenticated",
                "accounts": [{"label": "OpenAI API key", "active": True}],
            }
            await told_state("authenticated")
            assert told[-1] == signed_in
            assert await status("auth/status", {}) == signed_in
            assert await talk.prompt("@@ say signed in") == Ended({"stopReason": "end_turn"})

            assert await talk.client.request("logout", {}) == {}
            await told_state("unauthenticated")
            assert await status("auth/status", {}) == {"state": "unauthenticated"}
            with pytest.raises(RpcError) as refused:
                await talk.prompt("@@ say signed out")
            assert refused.value.code == AUTH_REQUIRED
    # Told each change once: signed in, then signed out.
    assert [t["state"] for t in told] == ["authenticated", "unauthenticated"]
    # The prompt that went through carried the key; none did after the sign-out.
    keys = [h.get("authorization") for h in scripted_model.request_headers]
    assert keys and all(key == "Bearer sk-bridge-test-key" for key in keys)
