"""Codex's server requests that ask the user something, and the answers Codex accepts.

Hand-written from Codex 0.169's schema (``tests/schemas/codex``) and checked against the
binary (what it sends, which answers it takes; see ``docs/mapping.md``). Unknown fields are
ignored, so a newer Codex that adds some still decodes.

Requests (server → client), each answered exactly once:

- ``item/commandExecution/requestApproval`` → ``{decision}``: ``"accept"``,
  ``"acceptForSession"``, ``{"acceptWithExecpolicyAmendment": {"execpolicy_amendment": [...]}}``,
  ``{"applyNetworkPolicyAmendment": {"network_policy_amendment": {action, host}}}``,
  ``"decline"`` (the item ends ``declined``, the turn goes on) or ``"cancel"`` (the turn is
  interrupted).
- ``item/fileChange/requestApproval`` → ``{decision}``: the same strings, no amendments.
- ``item/permissions/requestApproval`` → ``{permissions, scope}``: the subset of the requested
  permission profile that is granted (``{}``: none), for the ``turn`` or the ``session``.
- ``item/tool/requestUserInput`` → ``{answers: {QUESTION_ID: {answers: [TEXT, ...]}}}``; empty
  ``answers`` is "no answer" (Codex's own instructions tell the model to go on without one).
- ``mcpServer/elicitation/request`` → ``{action: "accept" | "decline" | "cancel", content?,
  _meta?}``. Codex also asks this way whether an MCP tool may run (``_meta.codex_approval_kind
  == "mcp_tool_call"``); ``_meta: {persist: "session" | "always"}`` on an ``accept`` remembers it.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .items import CommandAction

RequestId: TypeAlias = int | str


class ItemRequest(_Base):
    """What each of Codex's requests about one item of a turn names first (the approvals, the
    questions)."""

    threadId: str
    turnId: str
    itemId: str


# -- command execution -------------------------------------------------------------


class NetworkApprovalContext(_Base):
    host: str
    protocol: str = ""


class NetworkPolicyAmendment(_Base):
    action: str  # "allow" | "deny"
    host: str


class CommandExecutionRequestApprovalParams(ItemRequest):
    #: ``command`` (the default), ``writeStdin`` (input to a running terminal) or
    #: ``humanCommand`` (a checkpoint: only accept, decline and cancel are valid).
    kind: str = "command"
    approvalId: str | None = None
    command: str | None = None
    cwd: str | None = None
    reason: str | None = None
    commandActions: list[CommandAction] | None = None
    proposedExecpolicyAmendment: list[str] | None = None
    proposedNetworkPolicyAmendments: list[NetworkPolicyAmendment] | None = None
    networkApprovalContext: NetworkApprovalContext | None = None
    #: Not in the generated schema, but 0.169 sends it: the decisions its own UI offers.
    availableDecisions: list[Any] | None = None


class FileChangeRequestApprovalParams(ItemRequest):
    reason: str | None = None
    grantRoot: str | None = None


ApprovalDecision: TypeAlias = str | dict[str, Any]


class ApprovalResponse(_Base):
    """The answer to a command or file change approval."""

    decision: ApprovalDecision


ACCEPT: ApprovalDecision = "accept"
ACCEPT_FOR_SESSION: ApprovalDecision = "acceptForSession"
DECLINE: ApprovalDecision = "decline"
CANCEL: ApprovalDecision = "cancel"


def accept_with_execpolicy_amendment(prefix: list[str]) -> ApprovalDecision:
    return {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": list(prefix)}}


def apply_network_policy_amendment(amendment: NetworkPolicyAmendment) -> ApprovalDecision:
    rule = {"action": amendment.action, "host": amendment.host}
    return {"applyNetworkPolicyAmendment": {"network_policy_amendment": rule}}


# -- permissions --------------------------------------------------------------------


class PermissionsRequestApprovalParams(ItemRequest):
    cwd: str | None = None
    reason: str | None = None
    #: ``{fileSystem?: {read?, write?, entries?}, network?: {enabled?}}``: echoed back as the
    #: grant, so it stays a plain dict (Codex's own shape, whatever it holds).
    permissions: dict[str, Any] = msgspec.field(default_factory=dict)


PermissionGrantScope: TypeAlias = Literal["turn", "session"]


class PermissionsApprovalResponse(_Base):
    permissions: dict[str, Any]
    scope: PermissionGrantScope | UnsetType = UNSET


# -- questions ------------------------------------------------------------------------


class UserInputOption(_Base):
    label: str
    description: str = ""


class UserInputQuestion(_Base):
    id: str
    header: str = ""
    question: str = ""
    #: The user may type an answer of their own instead of picking an option.
    isOther: bool = False
    isSecret: bool = False
    options: list[UserInputOption] | None = None


class ToolRequestUserInputParams(ItemRequest):
    questions: list[UserInputQuestion] = msgspec.field(default_factory=list)
    isBlocking: bool = True


class UserInputAnswer(_Base):
    answers: list[str]


class ToolRequestUserInputResponse(_Base):
    answers: dict[str, UserInputAnswer]


NO_ANSWERS = ToolRequestUserInputResponse(answers={})


# -- MCP elicitations -------------------------------------------------------------------

#: ``_meta`` keys of an elicitation that asks whether an MCP tool may run.
APPROVAL_KIND_KEY = "codex_approval_kind"
APPROVAL_KIND_MCP_TOOL_CALL = "mcp_tool_call"
PERSIST_KEY = "persist"


class McpServerElicitationRequestParams(_Base):
    threadId: str
    serverName: str
    turnId: str | None = None
    #: ``form``, ``url``, or Codex's own ``openai/form`` / ``openaiForm``.
    mode: str = "form"
    message: str = ""
    requestedSchema: Any = None
    url: str | None = None
    elicitationId: str | None = None
    #: The environment whose MCP server asks (0.171). Codex's answer has no such member:
    #: the request's id says which question it answers.
    environmentId: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")

    def approval_meta(self) -> dict[str, Any] | None:
        """The ``_meta`` of an MCP tool-call approval, or ``None`` for any other elicitation."""
        meta = self.meta
        if isinstance(meta, dict) and meta.get(APPROVAL_KIND_KEY) == APPROVAL_KIND_MCP_TOOL_CALL:
            return meta
        return None


ElicitationAction: TypeAlias = Literal["accept", "decline", "cancel"]


class McpServerElicitationResponse(_Base):
    action: ElicitationAction
    content: dict[str, Any] | None | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


# -- notifications --------------------------------------------------------------------------


class ServerRequestResolved(_Base):
    """``serverRequest/resolved``: Codex no longer waits for an answer to ``requestId``."""

    threadId: str
    requestId: RequestId


class StartedItem(_Base):
    """What the approvals need of an ``item/started`` item (the rest is the tool calls' concern)."""

    type: str = ""
    id: str = ""
    # fileChange
    changes: list[dict[str, Any]] | None = None
    # mcpToolCall
    server: str | None = None
    tool: str | None = None
