"""An ACP client built on the official Python SDK (``agent-client-protocol``), as a program.

The end-to-end tests run it as a subprocess (the SDK is asyncio; the tests are trio), the way an
editor built on that SDK would run the bridge: it launches the agent command given after ``--``,
``initialize`` (v1, no ``subagents`` capability: what most editors declare), ``session/new``
in ``--cwd``, then one ``session/prompt`` per ``--prompt``. Every permission request is answered
with the first option of the ``--permission`` kind (default ``allow_once``). It prints one JSON
line per thing it saw, for the test to read:

- ``{"event": "update", "sessionId", "update"}`` for each ``session/update``;
- ``{"event": "permission", "sessionId", "toolCall", "options", "chosen"}`` for each request;
- ``{"event": "prompt", "stopReason"}`` or ``{"event": "error", "message"}`` per prompt.

Usage: ``python acp_python_sdk_client.py --cwd DIR --prompt TEXT [--permission KIND] -- AGENT...``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


class Recorder(Client):
    def __init__(self, permission: str) -> None:
        self.permission = permission

    async def request_permission(  # type: ignore[override]
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        chosen = next((o for o in options if o.kind == self.permission), None)
        emit(
            {
                "event": "permission",
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
                "options": [o.model_dump(mode="json", by_alias=True) for o in options],
                "chosen": chosen.option_id if chosen else None,
            }
        )
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:  # type: ignore[override]
        emit(
            {
                "event": "update",
                "sessionId": session_id,
                "update": update.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--prompt", action="append", default=[])
    parser.add_argument("--permission", default="allow_once")
    parser.add_argument("--timeout", type=float, default=80.0)
    parser.add_argument("agent", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    agent = [a for a in args.agent if a != "--"]
    # The SDK hands the agent a trimmed environment unless given one: pass ours whole (the
    # test's CODEX_HOME and runtime directory), and let the agent's stderr through.
    async with spawn_agent_process(
        Recorder(args.permission),
        *agent,
        env=dict(os.environ),
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), args.timeout)
        session = await asyncio.wait_for(conn.new_session(cwd=args.cwd), args.timeout)
        emit({"event": "session", "sessionId": session.session_id})
        for prompt in args.prompt:
            try:
                answer = await asyncio.wait_for(
                    conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)]),
                    args.timeout,
                )
            except RequestError as exc:
                emit({"event": "error", "message": str(exc)})
                continue
            emit({"event": "prompt", "stopReason": answer.stop_reason})
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
