"""What the user is shown for each of Codex's questions, and what Codex gets back.

Pure functions and small value types for :mod:`bridge.engine.approvals`: the
options of a permission request (:func:`command_choices`, each a :class:`Choice`
of an ACP option and the Codex answer it stands for), the titles of what is asked
about, and Codex's ``requestUserInput`` questions as one ACP elicitation form
(:class:`UserInputForm`).
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Raw

from ..acp import permissions as acp_permissions
from ..codex import approvals as codex_approvals
from .tool_views import unwrap_shell

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
    choices = [Choice(option(ALLOW_ONCE, "Allow", "allow_once"), decision(codex_approvals.ACCEPT))]
    if not checkpoint:
        choices.append(
            Choice(
                option(ALLOW_SESSION, "Allow for this session", "allow_always"),
                decision(codex_approvals.ACCEPT_FOR_SESSION),
            )
        )
    prefix = params.proposedExecpolicyAmendment
    if (
        prefix
        and not checkpoint
        and (offered is None or _offers(offered, "acceptWithExecpolicyAmendment"))
    ):
        shown = shlex.join(prefix)
        choices.append(
            Choice(
                option(
                    ALLOW_PREFIX, f"Always allow commands starting with `{shown}`", "allow_always"
                ),
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
    choices.append(
        Choice(option(REJECT_ONCE, "Reject", "reject_once"), decision(codex_approvals.DECLINE))
    )
    return choices


def _offers(decisions: list[Any], key: str) -> bool:
    return any(d == key or (isinstance(d, dict) and key in d) for d in decisions)


def command_title(command: str | None) -> str:
    """The same title the command's tool call has: the command without its shell wrapper."""
    return unwrap_shell(command) if command else "Run a command"


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
