"""A session on another machine: a real sshd on loopback (``tests/support/sshd.py``), the
machine ``box`` picked, a command approved here that runs there, then back on this machine."""

from __future__ import annotations

import json
from typing import Any

from bridge.acp_client import AcpClient

from . import Scenario, open_session

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


SCENARIOS = [
    Scenario(
        "machine_session",
        "a session on the machine box (an sshd on loopback): a command approved here runs "
        "there as its user, then one here",
        machine_session,
        machine=True,
    ),
]
