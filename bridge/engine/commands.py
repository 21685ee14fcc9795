"""Slash commands: ``/review [instructions]`` (``review/start``), ``/compact``
(``thread/compact/start``) and ``/shell COMMAND`` (``thread/shellCommand``).

They are offered (``available_commands_update``) right after a session with
settings is announced. Each starts a turn of its own in Codex; the prompt
resolves when that turn ends, and runs with the thread's settings as the last
turn left them.
"""

from __future__ import annotations

import re
from typing import Any

from ..acp import commands as acp_commands
from ..codex import commands as codex_commands
from ..codex import types as codex_types
from ..jsonrpc import RpcError
from .threads import ThreadRecord

COMMANDS: tuple[acp_commands.AvailableCommand, ...] = (
    acp_commands.AvailableCommand(
        name="review",
        description="Ask Codex to review the uncommitted changes, or what the instructions say.",
        input=acp_commands.UnstructuredCommandInput(hint="optional: what to review"),
    ),
    acp_commands.AvailableCommand(
        name="compact",
        description="Summarize the conversation so far to free up context.",
    ),
    acp_commands.AvailableCommand(
        name="shell",
        description="Run a shell command yourself, outside the sandbox and without approval.",
        input=acp_commands.UnstructuredCommandInput(hint="the command to run"),
    ),
)
_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?\Z", re.DOTALL)


def command_request(
    record: ThreadRecord, inputs: list[codex_types.UserInput]
) -> tuple[str, Any] | None:
    """The Codex request a slash command starts; ``None`` for an ordinary prompt.

    Only sessions with settings take commands (they are offered to those alone).
    """
    if record.settings is None or not inputs:
        return None
    first = inputs[0]
    match = _COMMAND.match(first.text) if isinstance(first, codex_types.TextInput) else None
    if match is None or match.group(1) not in {c.name for c in COMMANDS}:
        return None  # an ordinary prompt, even if it starts with a slash
    name = match.group(1)
    parts = [match.group(2) or ""]
    for index, extra in enumerate(inputs[1:], start=1):
        if not isinstance(extra, codex_types.TextInput):
            raise RpcError.invalid_params(f"/{name} takes text only (prompt[{index}] is not text)")
        parts.append(extra.text)
    argument = "\n".join(p.strip() for p in parts if p.strip())
    thread = record.id
    if name == "review":
        target: codex_commands.UncommittedChangesTarget | codex_commands.CustomReviewTarget = (
            codex_commands.CustomReviewTarget(instructions=argument)
            if argument
            else codex_commands.UncommittedChangesTarget()
        )
        return "review/start", codex_commands.ReviewStartParams(threadId=thread, target=target)
    if name == "compact":
        if argument:
            raise RpcError.invalid_params("/compact takes no arguments")
        return "thread/compact/start", codex_commands.ThreadCompactStartParams(threadId=thread)
    if not argument:
        raise RpcError.invalid_params("/shell needs a command, e.g. /shell git status")
    return "thread/shellCommand", codex_commands.ThreadShellCommandParams(
        threadId=thread, command=argument
    )
