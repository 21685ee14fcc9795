"""What the user is shown for each of Codex's questions, and what Codex gets back.

Pure functions and small value types for :mod:`bridge.engine.features.approvals.approvals`: the
options of a permission request (:func:`command_choices`, each a :class:`Choice`
of an ACP option and the Codex answer it stands for), the titles of what is asked
about, the kind a command's permission request claims (:func:`permission_kind`),
and Codex's ``requestUserInput`` questions as one ACP elicitation form
(:class:`UserInputForm`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Raw

from ....acp import permissions as acp_permissions
from ....codex import approvals as codex_approvals
from ....codex import items as codex_items
from ...core.record_parts import Settings
from ...views.command_kind import command_kind
from ...views.presets import CONFIG_MODE
from ...views.tool_views import unwrap_shell

log = logging.getLogger(__name__)

CodexAnswer = Any  # a msgspec Struct Codex's request expects as its result

#: Option ids this bridge offers; stable, so a client may remember them.
ALLOW_ONCE = "allow_once"
ALLOW_SESSION = "allow_session"
ALLOW_PREFIX = "allow_prefix"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"


@dataclass(slots=True)
class Choice:
    """One option offered to the user and the answer Codex gets if it is picked."""

    option: acp_permissions.PermissionOption
    answer: CodexAnswer


# -- helpers: what the user is shown -----------------------------------------------------------


def option(
    option_id: str, name: str, kind: acp_permissions.PermissionOptionKind
) -> acp_permissions.PermissionOption:
    return acp_permissions.PermissionOption(optionId=option_id, name=name, kind=kind)


def allow_once(answer: CodexAnswer, name: str = "Allow") -> Choice:
    return Choice(option(ALLOW_ONCE, name, "allow_once"), answer)


def allow_for_session(answer: CodexAnswer) -> Choice:
    return Choice(option(ALLOW_SESSION, "Allow for this session", "allow_always"), answer)


def reject_once(answer: CodexAnswer, name: str = "Reject") -> Choice:
    return Choice(option(REJECT_ONCE, name, "reject_once"), answer)


def decision(what: codex_approvals.ApprovalDecision) -> codex_approvals.ApprovalResponse:
    return codex_approvals.ApprovalResponse(decision=what)


def command_choices(params: codex_approvals.CommandExecutionRequestApprovalParams) -> list[Choice]:
    """Allow once, for the session, the amendments Codex proposes, reject.

    ``acceptForSession`` is offered although 0.169's ``availableDecisions`` leaves it out:
    Codex accepts it and stops asking for the same command. A ``humanCommand`` checkpoint
    takes only accept, decline and cancel.
    """
    checkpoint = params.kind == "humanCommand"
    offered = params.availableDecisions
    choices = [allow_once(decision(codex_approvals.ACCEPT))]
    if not checkpoint:
        choices.append(allow_for_session(decision(codex_approvals.ACCEPT_FOR_SESSION)))
    prefix = params.proposedExecpolicyAmendment
    if (
        prefix
        and not checkpoint
        and (offered is None or _offers(offered, "acceptWithExecpolicyAmendment"))
    ):
        choices.append(
            Choice(
                option(ALLOW_PREFIX, amendment_label(prefix), "allow_always"),
                decision(codex_approvals.accept_with_execpolicy_amendment(prefix)),
            )
        )
    for index, amendment in enumerate(params.proposedNetworkPolicyAmendments or []):
        if checkpoint:
            break
        allow = amendment.action == "allow"
        choices.append(
            Choice(
                option(
                    f"network_{amendment.action}_{index}",
                    f"Always {'allow' if allow else 'block'} {amendment.host}",
                    "allow_always" if allow else "reject_always",
                ),
                decision(codex_approvals.apply_network_policy_amendment(amendment)),
            )
        )
    choices.append(reject_once(decision(codex_approvals.DECLINE)))
    return choices


def amendment_label(prefix: list[str]) -> str:
    """The option for Codex's proposed exec-policy rule (a token list the command must start
    with), shown as the user reads commands: without the shell wrapper.

    Codex proposes the program and its first words (``["touch", "a.txt"]``) when it can read
    the script as simple commands; otherwise the whole wrapped line (``["/bin/bash", "-lc",
    "echo hi > a.txt"]``). That rule matches only the same script again, so it is shown as
    the command it allows, not as a prefix it is not."""
    # Here and below, not at the top: the engine's start asks no approval, so need not
    # import shlex.
    import shlex

    line = shlex.join(prefix)
    script = unwrap_shell(line)
    if script != line:
        return f"Always allow `{script}`"
    return f"Always allow commands starting with `{line}`"


def _offers(decisions: list[Any], key: str) -> bool:
    return any(d == key or (isinstance(d, dict) and key in d) for d in decisions)


def command_title(command: str | None) -> str:
    """The same title the command's tool call has: the command without its shell wrapper."""
    return unwrap_shell(command) if command else "Run a command"


# -- the kind a command's permission request claims ---------------------------------------------

#: The approval policy under which Codex asks before running a command *inside* the sandbox.
_UNTRUSTED = "untrusted"


def permission_kind(
    command: str | None, actions: Sequence[codex_items.CommandAction], *, escalated: bool
) -> acp_permissions.ToolKind:
    """The kind a permission request for ``command`` claims: it must never understate.

    The command's own kind (:func:`~bridge.engine.views.command_kind.command_kind`, the one its
    tool call shows: ``read`` / ``search`` only for one simple command that Codex parsed into
    reads, listings and searches alone), except ``execute`` when Codex asks to run it beyond
    the sandbox (``escalated``) or there is no command to judge.
    """
    if escalated or command is None:
        return "execute"
    return command_kind(command, list(actions))


def escalated_command(settings: Settings | None) -> bool:
    """Whether Codex's command approvals on a thread with these settings are for commands that
    would run beyond the sandbox (an escalation, or a retry without it after a sandbox failure).

    Codex's request carries no flag for it, but the approval policy tells: under ``on-request``,
    ``on-failure`` or a granular policy Codex asks only for those; under ``untrusted`` it also asks
    before running, inside the sandbox, a command it does not know to be safe. So a request counts
    as escalated unless the policy in force is surely ``untrusted``: the one Codex reported, and
    the one of the mode the user picked, if any (no preset is ``untrusted``; only the mode standing
    for the thread's own configured policies can be). Unknown settings count as escalated.
    """
    if settings is None or settings.approval != _UNTRUSTED:
        return True
    picked = settings.picked_mode
    if picked is None:
        return False
    return not (
        picked == CONFIG_MODE
        and settings.config_policy is not None
        and settings.config_policy[0] == _UNTRUSTED
    )


def file_change_title(changes: list[dict[str, Any]], cwd: str) -> str:
    paths = [c.get("path") for c in changes]
    shown = [_relative(p, cwd) for p in paths if isinstance(p, str)]
    if not shown:
        return "Apply a patch"
    if len(shown) == 1:
        kind = changes[0].get("kind")
        change = kind.get("type") if isinstance(kind, dict) else None
        verb = {"add": "Create", "delete": "Delete"}.get(str(change), "Edit")
        return f"{verb} {shown[0]}"
    return f"Edit {len(shown)} files: {', '.join(shown)}"


def _relative(path: str, cwd: str) -> str:
    if cwd and posixpath.isabs(path) and (path == cwd or path.startswith(cwd.rstrip("/") + "/")):
        return posixpath.relpath(path, cwd)
    return path


def permissions_title(permissions: dict[str, Any]) -> str:
    """``Grant write access to /x, network access`` from a requested permission profile."""
    parts: list[str] = []
    file_system = permissions.get("fileSystem")
    if isinstance(file_system, dict):
        for access in ("write", "read"):
            paths = file_system.get(access)
            if isinstance(paths, list):
                parts += [f"{access} access to {p}" for p in paths if isinstance(p, str)]
        if not parts:
            for entry in file_system.get("entries") or []:
                path = entry.get("path") if isinstance(entry, dict) else None
                where = path.get("path") if isinstance(path, dict) else None
                if isinstance(where, str):
                    parts.append(f"{entry.get('access', 'access')} access to {where}")
    network = permissions.get("network")
    if isinstance(network, dict) and network.get("enabled"):
        parts.append("network access")
    return "Grant " + ", ".join(parts) if parts else "Grant additional permissions"


# -- questions as forms ------------------------------------------------------------------------


class UserInputForm:
    """Codex's ``requestUserInput`` questions as one ACP elicitation form, and back.

    Each question is a string field named by its id, titled by its header and described by its
    question; its options become a single-select (``oneOf``: label as value and title,
    description). A question that also takes the user's own words (``isOther``) gets a second,
    free-text field ``ID_other``; its answer follows the choice, if both are given.
    """

    def __init__(self, questions: list[codex_approvals.UserInputQuestion]) -> None:
        self.questions = questions
        self.other_field: dict[str, str] = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for question in questions:
            field_schema: dict[str, Any] = {
                "type": "string",
                "title": question.header or question.id,
            }
            if question.question:
                field_schema["description"] = question.question
            if question.options:
                field_schema["oneOf"] = [_enum_option(o) for o in question.options]
            properties[question.id] = field_schema
        taken = set(properties)
        for question in questions:
            if not question.options or not question.isOther:
                required.append(question.id)
            else:
                name = f"{question.id}_other"
                if name in taken:
                    continue
                taken.add(name)
                self.other_field[question.id] = name
                properties[name] = {
                    "type": "string",
                    "title": f"{question.header or question.id}: your own answer",
                    "description": "Instead of a choice above, or to add to it.",
                }
        self.schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            self.schema["required"] = required
        if len(questions) == 1:
            self.message = questions[0].question or questions[0].header or "Codex has a question"
        else:
            self.message = f"Codex has {len(questions)} questions"

    def answers(self, response: acp_permissions.CreateElicitationResponse | None) -> CodexAnswer:
        """Codex's answers; none when the user declined or cancelled, or the form is unusable."""
        if response is None or response.action != "accept" or not response.content:
            return codex_approvals.NO_ANSWERS
        content = response.content
        answers: dict[str, codex_approvals.UserInputAnswer] = {}
        for question in self.questions:
            given = _texts(content.get(question.id))
            other = self.other_field.get(question.id)
            if other is not None:
                given += _texts(content.get(other))
            if given:
                answers[question.id] = codex_approvals.UserInputAnswer(answers=given)
        return codex_approvals.ToolRequestUserInputResponse(answers=answers)


def _enum_option(option: codex_approvals.UserInputOption) -> dict[str, Any]:
    shown: dict[str, Any] = {"const": option.label, "title": option.label}
    if option.description:
        shown["description"] = option.description
    return shown


def _texts(value: Any) -> list[str]:
    """A form value as answer texts: a non-empty string, or the strings of a list."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v.strip()]
    if isinstance(value, bool | int | float):
        return [msgspec.json.encode(value).decode()]
    return []


def decode_elicitation(raw: Raw, method: str) -> acp_permissions.CreateElicitationResponse | None:
    try:
        return msgspec.json.decode(raw, type=acp_permissions.CreateElicitationResponse)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("malformed elicitation answer for %s: %s; declining", method, exc)
        return None


def mcp_answer(response: acp_permissions.CreateElicitationResponse | None) -> CodexAnswer:
    """An ACP elicitation answer as MCP's (the same three actions; content only on accept)."""
    if response is None:
        return codex_approvals.McpServerElicitationResponse(action="decline")
    if response.action == "accept":
        return codex_approvals.McpServerElicitationResponse(
            action="accept", content=response.content
        )
    if response.action == "cancel":
        return codex_approvals.McpServerElicitationResponse(action="cancel")
    if response.action != "decline":
        log.warning("unknown elicitation action %r; declining", response.action)
    return codex_approvals.McpServerElicitationResponse(action="decline")
