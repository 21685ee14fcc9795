"""A session's settings and commands: modes, config options, slash commands, auth_required."""

from __future__ import annotations

from typing import Any

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError

from . import Scenario, open_session


def _update_of(kind: str) -> Any:
    return lambda m: (
        m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    )


async def modes(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    await client.prompt(session, "@@ say as configured")
    await client.request("session/set_mode", {"sessionId": session, "modeId": "read-only"})
    await client.prompt(session, "@@ say read only")
    await client.request(
        "session/set_config_option",
        {"sessionId": session, "configId": "mode", "value": "full-access"},
    )
    await client.prompt(session, "@@ say full access")


async def config_options(client: AcpClient, workspace: str) -> None:
    await client.initialize()
    opened = await client.request("session/new", {"cwd": workspace, "mcpServers": []})
    session = opened["sessionId"]
    # The whole model catalog is in the answer: a client that reads only it can pick.
    model = next(o for o in opened["configOptions"] if o["id"] == "model")
    picked = next(o["value"] for o in model["options"] if o["value"] != model["currentValue"])
    answer = await client.request(
        "session/set_config_option", {"sessionId": session, "configId": "model", "value": picked}
    )
    effort = next(o for o in answer["configOptions"] if o["id"] == "reasoning_effort")
    other = next(o["value"] for o in effort["options"] if o["value"] != effort["currentValue"])
    await client.request(
        "session/set_config_option",
        {"sessionId": session, "configId": "reasoning_effort", "value": other},
    )
    await client.prompt(session, "@@ say picked")


async def slash_commands(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    await client.wait_for(_update_of("available_commands_update"))
    await client.prompt(session, "@@ say hello")
    await client.prompt(session, "/review check the greeting")
    await client.prompt(session, "/compact")
    await client.prompt(session, "/shell echo from the shell")
    # Answered without a turn: agent text, then end_turn.
    await client.prompt(session, "/status")
    await client.prompt(session, "/goal keep the greeting short")
    await client.prompt(session, "/rename Greeting")


async def auth_required(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace)
    try:
        await client.prompt(session, "@@ say hi")
    except RpcError as exc:
        if exc.code != -32000:
            raise
    else:
        raise AssertionError("the turn was expected to fail for lack of credentials")


SCENARIOS = [
    Scenario(
        "modes",
        "the configured mode, then session/set_mode and set_config_option (mode) stored in the thread",
        modes,
    ),
    Scenario(
        "config_options",
        "the whole model catalog in session/new's answer, then a model and an effort picked",
        config_options,
    ),
    Scenario(
        "slash_commands",
        "available commands; /review, /compact, /shell as turns; /status, /goal, /rename as text",
        slash_commands,
    ),
    Scenario(
        "auth_required",
        "a provider whose API key variable is unset: the prompt fails with auth_required",
        auth_required,
        extra_toml='[model_providers.mock]\nenv_key = "CODEX_ACP_BRIDGE_FIXTURE_UNSET_KEY"',
    ),
]
