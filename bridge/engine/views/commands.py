"""Slash commands, as Codex's own UI offers them.

They are offered (``available_commands_update``) right after a session with
settings is announced. Two kinds:

- commands that start a turn of their own in Codex; the prompt resolves when
  that turn ends: ``/review [instructions]``, ``/review-branch BASE``,
  ``/review-commit SHA`` (``review/start``), ``/compact``
  (``thread/compact/start``), ``/shell COMMAND`` (``thread/shellCommand``);
- commands answered at once as agent text (:class:`QuickCommand`, run by
  :mod:`bridge.engine.features.palette.palette`): ``/status``, ``/mcp``, ``/skills``, ``/goal``,
  ``/plan [off]``, ``/rename NAME``, ``/logout``, ``/rewind [N]`` (which a session busy with
  a turn refuses at once, rather than queue: it takes back finished prompts only).

Each enabled skill Codex has for the session's folder (``skills/list``, asked once the
session is announced) is offered too, as ``/SKILL [what to do]``: a turn whose input
names the skill. Anything else that starts with a slash is an ordinary prompt.

An AIR client is told how to present them (``_meta.jetbrains.air``): ``/goal`` carries
``commandAction {kind: "prefixPrompt", presentation: "state"}`` (what follows the command
in the prompt is its objective), and each skill its ``skillPath`` (Codex's path of its
``SKILL.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from ...acp import air
from ...acp import commands as acp_commands
from ...codex import commands as codex_commands
from ...codex import types as codex_types
from ...jsonrpc import RpcError
from ..core.threads import ThreadRecord


def _command(name: str, description: str, hint: str | None = None) -> acp_commands.AvailableCommand:
    return acp_commands.AvailableCommand(
        name=name,
        description=description,
        input=acp_commands.UnstructuredCommandInput(hint=hint) if hint else UNSET,
    )


COMMANDS: tuple[acp_commands.AvailableCommand, ...] = (
    _command("status", "Show the session's model, mode, context use, account and usage limits."),
    _command("mcp", "List the MCP servers Codex uses, their state and their tools."),
    _command("skills", "List the skills Codex has for this workspace."),
    _command(
        "review",
        "Ask Codex to review the uncommitted changes, or what the instructions say.",
        "optional: what to review",
    ),
    _command(
        "review-branch",
        "Ask Codex to review the changes of this branch against a base branch.",
        "the base branch, e.g. main",
    ),
    _command("review-commit", "Ask Codex to review the changes of one commit.", "a commit SHA"),
    _command("compact", "Summarize the conversation so far to free up context."),
    _command(
        "goal",
        "Show the session's long-running goal, set it, or pause, resume or clear it.",
        "optional: an objective, or pause, resume, clear",
    ),
    _command(
        "plan",
        "Plan mode: Codex plans with you before it changes anything (/plan off to leave).",
        "optional: off",
    ),
    _command("rename", "Rename this session.", "the new name"),
    _command(
        "rewind",
        "Take back the last prompt (or the last N): the conversation, and the files it changed "
        "where they are still as it left them.",
        "optional: how many prompts, e.g. 2",
    ),
    _command("logout", "Sign Codex out of your account on this machine."),
    _command(
        "shell",
        "Run a shell command yourself, outside the sandbox and without approval.",
        "the command to run",
    ),
)
#: Commands answered without a turn of their own (see :mod:`bridge.engine.features.palette.palette`).
QUICK = frozenset({"status", "mcp", "skills", "goal", "plan", "rename", "logout", "rewind"})
#: ``/mcp login NAME``: sign in to MCP server NAME (its OAuth, through Codex).
_MCP_LOGIN = r"login\s+(\S+)"
#: The most prompts one ``/rewind`` takes back.
MAX_REWIND = 1000
_NAMES = frozenset(c.name for c in COMMANDS)

#: AIR's command actions: the client keeps ``/goal`` before what the user types next and
#: shows it as the prompt's state. ``/plan``'s would set a config option; Codex's plan mode
#: is a command here, not an option.
_ACTIONS: dict[str, dict[str, Any]] = {"goal": {"kind": "prefixPrompt", "presentation": "state"}}


def offered(air_client: bool) -> list[acp_commands.AvailableCommand]:
    """The commands a session offers (an AIR client's with their command actions)."""
    if not air_client:
        return list(COMMANDS)
    return [
        msgspec.structs.replace(c, meta=air.meta({air.COMMAND_ACTION: _ACTIONS[c.name]}))
        if c.name in _ACTIONS
        else c
        for c in COMMANDS
    ]


def skill_command(
    name: str, description: str, path: str, air_client: bool
) -> acp_commands.AvailableCommand:
    """A skill offered as ``/NAME [what to do]`` (an AIR client is told its path)."""
    return acp_commands.AvailableCommand(
        name=name,
        description=f"Skill: {description or name}",
        input=acp_commands.UnstructuredCommandInput(hint="optional: what to do"),
        meta=air.meta({air.SKILL_PATH: path}) if air_client else UNSET,
    )


@dataclass(frozen=True, slots=True)
class QuickCommand:
    """A slash command answered as agent text, without a turn: its name and argument."""

    name: str
    argument: str


# Compiled at first use (the re module caches it), not at import.
_COMMAND = r"(?s)/([A-Za-z][\w-]*)(?:\s+(.*))?\Z"


def is_rewind(record: ThreadRecord, inputs: list[codex_types.UserInput]) -> bool:
    """The prompt is ``/rewind`` (in a session that takes commands)."""
    if record.settings is None or not inputs or not isinstance(inputs[0], codex_types.TextInput):
        return False
    match = re.match(_COMMAND, inputs[0].text)
    return match is not None and match.group(1) == "rewind"


def rewind_count(argument: str) -> int:
    """How many prompts ``/rewind ARGUMENT`` takes back (-32602 unless a whole number from 1)."""
    if not argument:
        return 1
    if re.fullmatch("[0-9]{1,9}", argument) is None or not 1 <= int(argument) <= MAX_REWIND:
        raise RpcError.invalid_params(
            f"/rewind takes how many prompts to take back, from 1 to {MAX_REWIND} "
            f"(e.g. /rewind 2), not {argument!r}"
        )
    return int(argument)


def command_request(
    record: ThreadRecord, inputs: list[codex_types.UserInput]
) -> tuple[str, Any] | QuickCommand | None:
    """The Codex request a slash command starts (or the command answered without a turn);
    ``None`` for an ordinary prompt.

    Only sessions with settings take commands (they are offered to those alone).
    """
    if record.settings is None or not inputs:
        return None
    first = inputs[0]
    match = re.match(_COMMAND, first.text) if isinstance(first, codex_types.TextInput) else None
    if match is None or (match.group(1) not in _NAMES and match.group(1) not in record.skills):
        return None  # an ordinary prompt, even if it starts with a slash
    name = match.group(1)
    parts = [match.group(2) or ""]
    for index, extra in enumerate(inputs[1:], start=1):
        if not isinstance(extra, codex_types.TextInput):
            raise RpcError.invalid_params(f"/{name} takes text only (prompt[{index}] is not text)")
        parts.append(extra.text)
    argument = "\n".join(p.strip() for p in parts if p.strip())
    if name not in _NAMES:  # a configured skill: a turn that uses it
        skill = codex_types.SkillInput(name=name, path=record.skills[name])
        text = [codex_types.TextInput(text=argument)] if argument else []
        return "turn/start", codex_types.TurnStartParams(threadId=record.id, input=[skill, *text])
    if name in QUICK:
        if name in ("status", "skills", "logout") and argument:
            raise RpcError.invalid_params(f"/{name} takes no arguments")
        if name == "mcp" and argument and mcp_login_name(argument) is None:
            raise RpcError.invalid_params("/mcp takes no arguments, or login NAME")
        if name == "plan" and argument not in ("", "on", "off"):
            raise RpcError.invalid_params("/plan takes no argument, or off")
        if name == "rewind":
            rewind_count(argument)
        if name == "rename" and not argument:
            raise RpcError.invalid_params("/rename needs a name, e.g. /rename fix the login bug")
        return QuickCommand(name, argument)
    thread = record.id
    if name == "review":
        target: codex_commands.ReviewTarget = (
            codex_commands.CustomReviewTarget(instructions=argument)
            if argument
            else codex_commands.UncommittedChangesTarget()
        )
        return "review/start", codex_commands.ReviewStartParams(threadId=thread, target=target)
    if name in ("review-branch", "review-commit"):
        if not argument or len(argument.split()) != 1:
            what = "a base branch, e.g. main" if name == "review-branch" else "one commit SHA"
            raise RpcError.invalid_params(f"/{name} needs {what}")
        target = (
            codex_commands.BaseBranchTarget(branch=argument)
            if name == "review-branch"
            else codex_commands.CommitTarget(sha=argument)
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


def mcp_login_name(argument: str) -> str | None:
    """The server ``/mcp login NAME`` names (``None``: plain ``/mcp``)."""
    match = re.fullmatch(_MCP_LOGIN, argument)
    return match.group(1) if match else None
