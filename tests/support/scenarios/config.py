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
    session = await open_session(client, workspace)
    # The model catalog arrives after the session: an update widens the model option.
    update = await client.wait_for(_update_of("config_option_update"))
    options = update["params"]["update"]["configOptions"]
    model = next(o for o in options if o["id"] == "model")
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
        "the configured mode, then session/set_mode and set_config_option (mode) sent with turns",
        modes,
    ),
    Scenario(
        "config_options",
        "model catalog after session/new, then a model and a reasoning effort picked",
        config_options,
    ),
    Scenario(
        "slash_commands",
        "available commands after session/new; /review, /compact and /shell as turns",
        slash_commands,
    ),
    Scenario(
        "auth_required",
        "a provider whose API key variable is unset: the prompt fails with auth_required",
        auth_required,
        extra_toml='[model_providers.mock]\nenv_key = "CODEX_ACP_BRIDGE_FIXTURE_UNSET_KEY"',
    ),
]
