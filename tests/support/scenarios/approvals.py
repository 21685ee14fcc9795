"""Approvals and questions: permission requests answered each way, a cancel while one is open,
and a question for a client that cannot show forms. Also :class:`Answers`, the client's side."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from trio.testing import wait_all_tasks_blocked

from bridge.acp_client import AcpClient
from bridge.jsonrpc import ErrorCode, RpcError
from tests.support.reading import Ended

from . import Drive, Scenario, open_session

#: A command the sandbox would refuse, so Codex asks before running it.
ESCALATED = (
    '@@ call exec_command {"cmd":"touch approved.txt","sandbox_permissions":"require_escalated",'
    '"justification":"test"}\n@@ then\n@@ say done'
)
#: A patch inside ``.git/`` (read-only under workspace-write): Codex asks before applying it.
PATCH_IN_GIT = (
    '@@ call exec_command {"cmd":"apply_patch <<\'EOF\'\\n*** Begin Patch\\n'
    '*** Add File: .git/approved-note.txt\\n+hi\\n*** End Patch\\nEOF\\n"}\n@@ then\n@@ say done'
)
#: A question with two options (Codex adds a free-text "other" of its own).
QUESTION = (
    '@@ call request_user_input {"questions":[{"id":"color","header":"Color",'
    '"question":"Which color?","options":[{"label":"Red","description":"warm"},'
    '{"label":"Blue","description":"cool"}]}]}\n@@ then\n@@ say done'
)
#: Codex offers ``request_user_input`` outside Plan mode only with this feature.
QUESTIONS_TOML = "[features]\ndefault_mode_request_user_input = true\n"
#: The workspace needs a ``.git`` folder for :data:`PATCH_IN_GIT` to need approval.
GIT_FOLDER = ((".git/HEAD", "ref: refs/heads/main\n"),)
#: The tests' MCP server, whose tools Codex runs only once the user allows it.
MCP_SERVER_TOML = (
    f"[mcp_servers.testmcp]\ncommand = {json.dumps(sys.executable)}\n"
    f"args = [{json.dumps(str(Path(__file__).resolve().parents[1] / 'mcp_server.py'))}]\n"
)
MCP_ECHO = '@@ call mcp__testmcp/echo {"text":"hello"}\n@@ then\n@@ say done'


def approving(asked: list[dict[str, Any]]) -> Callable[[str, Any], Any]:
    """A client that allows every permission request once (its ``allow_once`` option),
    noting each; any other request fails the test."""

    async def on_request(method: str, params: Any) -> Any:
        asked.append(params)
        if method == "session/request_permission":
            allow = next(o for o in params["options"] if o["kind"] == "allow_once")
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        raise AssertionError(f"unexpected request {method}")

    return on_request


@dataclass
class Answers:
    """A client's answers to the agent's requests, as a test wants them.

    Pass it as ``on_request``. A permission request is answered with the option ``permission``
    (``None``: the ``cancelled`` outcome); an elicitation with ``elicitation``. With ``hold``,
    every answer waits until :meth:`release` (to cancel the turn meanwhile); with ``think``,
    that many seconds more. Every request is
    kept in ``requests``; ``asked`` is set by the first.
    """

    permission: str | None = "allow_once"
    elicitation: dict[str, Any] = field(default_factory=lambda: {"action": "decline"})
    hold: bool = False
    #: Seconds before answering, as a person reading the request takes: any other answer
    #: Codex would take first (another connection's) has come by then.
    think: float = 0.0
    requests: list[tuple[str, Any]] = field(default_factory=list)
    asked: trio.Event = field(default_factory=trio.Event)
    _released: trio.Event = field(default_factory=trio.Event)

    def release(self) -> None:
        self._released.set()

    async def __call__(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        self.asked.set()
        if self.hold:
            await self._released.wait()
        await trio.sleep(self.think)
        if method == "session/request_permission":
            if self.permission is None:
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": self.permission}}
        if method == "elicitation/create":
            return self.elicitation
        raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"client does not support {method}")

    def asked_for(self, method: str) -> list[Any]:
        return [params for m, params in self.requests if m == method]


def answering(permission: str, *prompts: str) -> Drive:
    """A scenario: ``prompts`` in one session, each permission asked answered ``permission``."""

    async def drive(client: AcpClient, workspace: str) -> None:
        client.on_request = Answers(permission=permission)
        session = await open_session(client, workspace)
        for prompt in prompts:
            await client.prompt(session, prompt)

    return drive


approval_allowed_once = answering("allow_once", ESCALATED)
approval_rejected = answering("reject_once", ESCALATED)


async def approval_cancelled_while_pending(client: AcpClient, workspace: str) -> None:
    answers = Answers(permission="allow_once", hold=True)
    client.on_request = answers
    session = await open_session(client, workspace)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, ESCALATED)
        await answers.asked.wait()
        await client.notify("session/cancel", {"sessionId": session})
        # The prompt resolves cancelled; the allow that follows is too late to count.
        await client.wait_for(lambda m: m.get("result") == Ended({"stopReason": "cancelled"}))
        answers.release()
        await wait_all_tasks_blocked()  # the late answer is on its way
    await client.prompt(session, "@@ say still here")


async def user_input_declined(client: AcpClient, workspace: str) -> None:
    # No elicitation capability: the question gets no answers, the turn goes on.
    session = await open_session(client, workspace)
    await client.prompt(session, QUESTION)


# The second call is not asked again.
mcp_tool_allowed_for_session = answering("allow_session", MCP_ECHO, MCP_ECHO)


async def patch_approved(client: AcpClient, workspace: str) -> None:
    client.on_request = Answers(permission="allow_once")
    session = await open_session(client, workspace)
    await client.prompt(session, PATCH_IN_GIT)


SCENARIOS = [
    Scenario(
        "approval_allowed_once",
        "an escalated command, allowed once: it runs and the turn ends",
        approval_allowed_once,
    ),
    Scenario(
        "approval_rejected",
        "an escalated command, rejected: the item ends declined and the turn goes on",
        approval_rejected,
    ),
    Scenario(
        "approval_cancelled_while_pending",
        "session/cancel while a permission request is open; the client's late allow is dropped",
        approval_cancelled_while_pending,
    ),
    Scenario(
        "user_input_declined",
        "request_user_input for a client without elicitation: no answers, the turn goes on",
        user_input_declined,
        extra_toml=QUESTIONS_TOML,
    ),
    Scenario(
        "patch_approved",
        "a patch inside .git/ needs approval; allowed once, it applies",
        patch_approved,
        files=GIT_FOLDER,
    ),
    Scenario(
        "mcp_tool_allowed_for_session",
        "an MCP tool call asks first; allowed for the session, the next call is not asked",
        mcp_tool_allowed_for_session,
        extra_toml=MCP_SERVER_TOML,
    ),
]
