"""A session on another machine: a real sshd on loopback (``tests/support/sshd.py``), the
machine ``box`` picked, a command approved here that runs there, then back on this machine.
And a session in a container of its own (a sandbox machine, podman), loaded again after its
container went: told so, its next command in a fresh one."""

from __future__ import annotations

import json
from typing import Any

from bridge.acp_client import AcpClient

from . import Scenario, open_session
from .sessions import only_session

WHO = json.dumps(
    {"cmd": "id -un", "sandbox_permissions": "require_escalated", "justification": "test"}
)
ON_THE_MACHINE = f"@@ call exec_command {WHO}\n@@ then\n@@ say ran there"
HERE = '@@ call exec_command {"cmd": "echo here"}\n@@ then\n@@ say ran here'


async def _allow(method: str, params: Any) -> Any:
    assert method == "session/request_permission", method
    allow = next(o for o in params["options"] if o["kind"] == "allow_once")
    return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}


async def machine_session(client: AcpClient, workspace: str) -> None:
    client.on_request = _allow
    session = await open_session(client, workspace)
    pick = {"sessionId": session, "configId": "machine"}
    await client.request("session/set_config_option", {**pick, "value": "box"})
    await client.prompt(session, ON_THE_MACHINE)
    await client.request("session/set_config_option", {**pick, "value": "local"})
    await client.prompt(session, HERE)


def _escalated(cmd: str, then: str) -> str:
    args = {"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": "test"}
    return f"@@ call exec_command {json.dumps(args)}\n@@ then\n@@ say {then}"


async def sandbox_session(client: AcpClient, workspace: str) -> None:
    """Not recorded: a session on the sandbox machine leaves a mark in its container's
    /root; the bridge that made the container removes it as it ends."""
    client.on_request = _allow
    session = await open_session(client, workspace)
    pick = {"sessionId": session, "configId": "machine", "value": "sandbox"}
    await client.request("session/set_config_option", pick)
    await client.prompt(session, _escalated("touch /root/was-here first.txt", "marked"))


async def sandbox_loaded_again(client: AcpClient, workspace: str) -> None:
    client.on_request = _allow
    await client.initialize()
    session = await only_session(client)
    await client.request("session/load", {"sessionId": session, "cwd": workspace, "mcpServers": []})
    await client.prompt(session, _escalated("ls -A /root; touch second.txt", "a fresh one"))


SCENARIOS = [
    Scenario(
        "machine_session",
        "a session on the machine box (an sshd on loopback): a command approved here runs "
        "there as its user, then one here",
        machine_session,
        machine=True,
    ),
    Scenario(
        "sandbox_loaded_again",
        "a session on a sandbox machine (a podman container of its own), loaded by the next "
        "bridge: told its container is gone; its next command runs in a fresh one",
        sandbox_loaded_again,
        prepare=sandbox_session,
        sandbox=True,
    ),
]
