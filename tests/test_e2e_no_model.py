"""A prompt whose model Codex cannot reach ends, within a bound, with the reason; against the real Codex.

Codex 0.169 never gives up on a model it cannot reach: it retries with ``error`` notifications
(``willRetry: true``, "Reconnecting... 2/5", then "Reconnecting... waiting for network" without
end) and sends nothing else. Two ways a user meets this: nobody signed in to an OpenAI provider
on a machine without network (the answer is ``auth_required``, which ``account/read`` tells at the
first retry), and a model provider whose endpoint is down (the answer names it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from bridge.daemon.daemon import free_port
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.jsonrpc import RpcError
from bridge.scripted_model import write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN
from tests.support.e2e import assert_valid_acp, running_bridge

pytestmark = pytest.mark.e2e

#: Well under the 180 s of silence a prompt met before, with room for a loaded machine.
BOUND_SECONDS = 45

#: Codex on OpenAI, its default provider, with nobody signed in.
OPENAI_CONFIG = """\
model = "gpt-5.1-codex"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
shell_snapshot = false
"""


def _env(codex_home: Path, codex_bin: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    env["CODEX_HOME"] = str(codex_home)
    env[ENV_CODEX_BIN] = codex_bin
    env[ENV_RUNTIME_DIR] = str(codex_home.parent / "runtime")
    return env


async def _failed_prompt(
    argv: list[str], env: dict[str, str], workspace: Path, log: Path, *, notices: bool
) -> tuple[RpcError, list[str]]:
    """A prompt's error, and the notices (or thoughts) the client got while it waited."""
    capabilities = {"session": {"notices": {}}} if notices else None
    async with running_bridge(argv, env, log) as client:
        await client.initialize(capabilities)
        session = await client.new_session(str(workspace))
        with trio.fail_after(BOUND_SECONDS), pytest.raises(RpcError) as failure:
            await client.prompt(session, "hello")
        told = [
            u["update"].get("description") or u["update"]["content"]["text"]
            for u in client.updates
            if u["update"]["sessionUpdate"] in ("notice", "agent_thought_chunk")
        ]
        assert_valid_acp(client, unstable=notices)
    return failure.value, told


async def test_a_prompt_with_nobody_signed_in_and_no_network_is_auth_required(
    bridge_argv: list[str], codex_bin: str, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(OPENAI_CONFIG)
    env = _env(home, codex_bin)
    error, _told = await _failed_prompt(
        bridge_argv, env, workspace, tmp_path / "bridge.log", notices=False
    )
    assert error.code == -32000, error  # ACP's auth_required: the client offers sign-in
    assert "not signed in" in error.message


async def test_a_prompt_whose_model_endpoint_is_down_fails_naming_it(
    bridge_argv: list[str], codex_bin: str, workspace: Path, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    home = tmp_path / "codex-home"
    write_codex_home(home, url)
    env = _env(home, codex_bin)
    error, told = await _failed_prompt(
        bridge_argv, env, workspace, tmp_path / "bridge.log", notices=True
    )
    assert error.code == -32603, error
    assert url in error.message and "could not reach" in error.message
    assert error.data["modelProvider"] == "mock"
    # While Codex retried, the client was told why.
    assert told and all("Reconnecting" in text for text in told)
