"""ACP v2 (draft) wire types: what differs from v1 (``schema.json`` / ``schema.unstable.json``
of ``acp-schema/v2``).

Only the shapes v2 changed or added are here. Updates whose v1 and v2 shapes
are the same (message and thought chunks, ``tool_call_update``, session info,
usage, notices, compaction, ``subagent_update``, ``session_message``) are sent
with their v1 Structs. Optional fields follow the v2 patch rule: ``UNSET``
leaves a value unchanged (the encoder leaves it out), ``None`` clears it.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..wire import WireStruct as _Base
from . import air
from .types import AuthEnvVar as AuthEnvVar  # v1 and v2 name one env var alike
from .types import Meta, Usage

# -- initialize -------------------------------------------------------------------------------


class Implementation(_Base):
    name: str
    version: str
    title: str | None | UnsetType = UNSET


class ClientCapabilities(_Base):
    #: ``{"terminal": {}}``: the client can run the agent in a terminal to sign in.
    auth: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    #: Proposals' client markers (``quota``, ``listChanged``).
    session: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class InitializeParams(_Base):
    protocolVersion: int
    info: Implementation | None = None
    capabilities: ClientCapabilities = msgspec.field(default_factory=ClientCapabilities)


class PromptCapabilities(_Base):
    image: dict[str, Any] | UnsetType = UNSET
    audio: dict[str, Any] | UnsetType = UNSET
    embeddedContext: dict[str, Any] | UnsetType = UNSET


class SessionCapabilities(_Base):
    """``{}`` for a capability means "supported" (v2 uses presence, not booleans)."""

    prompt: PromptCapabilities | UnsetType = UNSET
    mcp: dict[str, Any] | UnsetType = UNSET
    fork: dict[str, Any] | UnsetType = UNSET
    archive: dict[str, Any] | UnsetType = UNSET
    delete: dict[str, Any] | UnsetType = UNSET
    status: dict[str, Any] | UnsetType = UNSET
    title: dict[str, Any] | UnsetType = UNSET
    #: The session-list proposal's markers (``changes``).
    list: dict[str, Any] | UnsetType = UNSET
    additionalDirectories: dict[str, Any] | UnsetType = UNSET


class AgentCapabilities(_Base):
    session: SessionCapabilities = msgspec.field(default_factory=SessionCapabilities)
    providers: dict[str, Any] | UnsetType = UNSET
    quota: dict[str, Any] | UnsetType = UNSET
    #: ``status`` (unstable: ``auth/status``); ``auth/logout`` needs no capability.
    auth: dict[str, Any] | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class AuthMethod(_Base):
    """``agent`` (the agent signs in, through ``auth/login``), ``terminal`` (the client runs
    the agent with ``args`` in a terminal), or the draft's ``env_var`` (``vars`` to set)."""

    type: str
    methodId: str
    name: str
    description: str | None | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    vars: list[AuthEnvVar] | UnsetType = UNSET


class InitializeResult(_Base):
    protocolVersion: int
    info: Implementation
    capabilities: AgentCapabilities
    authMethods: list[AuthMethod] | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- prompts and work state ---------------------------------------------------------------------


class PromptParams(_Base):
    sessionId: str
    prompt: list[Raw]


class PromptResult(_Base):
    """``session/prompt``'s answer: the prompt was inserted as this user message."""

    messageId: str


class Error(_Base):
    code: int
    message: str
    data: Any = UNSET


class StateUpdate(_Base, tag="state_update", tag_field="sessionUpdate"):
    """The session's foreground work: ``running``, ``requires_action``, ``idle``, ``unknown``."""

    state: str
    stopReason: str | None | UnsetType = UNSET
    error: Error | None | UnsetType = UNSET
    #: ``idle`` only: the tokens the work that just ended used (unstable).
    usage: Usage | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class UserMessage(_Base, tag="user_message", tag_field="sessionUpdate"):
    """A user message upsert: the echo of an inserted prompt."""

    messageId: str
    content: list[Raw] | None | UnsetType = UNSET


class AgentMessage(_Base, tag="agent_message", tag_field="sessionUpdate"):
    """An agent message upsert: ``content`` replaces what its chunks said so far."""

    messageId: str
    content: list[Any] | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- tool calls and plans -------------------------------------------------------------------------


class DiffChange(_Base):
    operation: str
    path: str


class DiffPatch(_Base):
    format: str
    text: str


class Diff(_Base, tag="diff", tag_field="type"):
    changes: list[DiffChange]
    patch: DiffPatch | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ToolCallCapabilities(_Base):
    """``cancel: {}`` while ``tool_call/cancel`` can stop the call; ``None`` once it cannot."""

    cancel: dict[str, Any] | None = None


class ToolCallUpdate(_Base, tag="tool_call_update", tag_field="sessionUpdate"):
    """v2's tool call upsert: v1's fields, plus ``capabilities`` and the ``cancelled`` status."""

    toolCallId: str
    name: str | None | UnsetType = UNSET
    title: str | UnsetType = UNSET
    kind: str | UnsetType = UNSET
    status: str | UnsetType = UNSET
    content: list[Any] | UnsetType = UNSET
    locations: list[Any] | UnsetType = UNSET
    rawInput: Any = UNSET
    rawOutput: Any = UNSET
    capabilities: ToolCallCapabilities | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- terminals (agent-owned, display only) ----------------------------------------------------------


class TerminalOutput(_Base):
    """A replacement snapshot of a terminal's output: the bytes, base64-encoded."""

    data: str


class TerminalExitStatus(_Base):
    """Present: the terminal's process exited (its code, when known)."""

    exitCode: int | None | UnsetType = UNSET
    signal: str | None | UnsetType = UNSET


class TerminalUpdate(_Base, tag="terminal_update", tag_field="sessionUpdate"):
    """An upsert of one terminal's state: what runs where, its whole output, its exit."""

    terminalId: str
    command: str | None | UnsetType = UNSET
    cwd: str | None | UnsetType = UNSET
    output: TerminalOutput | None | UnsetType = UNSET
    exitStatus: TerminalExitStatus | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class TerminalOutputChunk(_Base, tag="terminal_output_chunk", tag_field="sessionUpdate"):
    """Bytes appended to a terminal's output, base64-encoded on their own."""

    terminalId: str
    data: str
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class PlanItems(_Base, tag="items", tag_field="type"):
    planId: str
    entries: list[Any]


class PlanMarkdown(_Base, tag="markdown", tag_field="type"):
    planId: str
    content: str


class PlanUpdate(_Base, tag="plan_update", tag_field="sessionUpdate"):
    plan: PlanItems | PlanMarkdown
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ToolCallSubject(_Base, tag="tool_call", tag_field="type"):
    toolCall: Any


class RequestPermissionRequest(_Base):
    sessionId: str
    title: str
    options: list[Any]
    subject: ToolCallSubject | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- commands and config options --------------------------------------------------------------------


class TextCommandInput(_Base, tag="text", tag_field="type"):
    hint: str


class Command(_Base, tag="command", tag_field="type"):
    name: str
    description: str
    input: TextCommandInput | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class AvailableCommandsUpdate(_Base, tag="available_commands_update", tag_field="sessionUpdate"):
    availableCommands: list[Command]
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ConfigOptionUpdate(_Base, tag="config_option_update", tag_field="sessionUpdate"):
    configOptions: list[dict[str, Any]]
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- sessions --------------------------------------------------------------------------------------


class NewSessionParams(_Base):
    cwd: str
    #: Optional in v2 (v1 requires it).
    mcpServers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    additionalDirectories: list[str] | None = None


class ForkSessionParams(_Base):
    sessionId: str
    cwd: str
    mcpServers: list[dict[str, Any]] | None = msgspec.field(default_factory=list)
    additionalDirectories: list[str] | None = None
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SetConfigOptionParams(_Base):
    sessionId: str
    configId: str
    #: A value id (string) for a select; ``type: "boolean"`` with a bool for a toggle.
    value: Any
    type: str | UnsetType = UNSET


class ReplayFrom(_Base):
    type: str


class ResumeSessionParams(_Base):
    sessionId: str
    cwd: str
    mcpServers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    additionalDirectories: list[str] | None = None
    replayFrom: ReplayFrom | None = None


class SessionOpened(_Base):
    """``session/new`` / ``session/resume`` / ``session/fork``'s result (``sessionId`` only for
    the two that make one)."""

    sessionId: str | UnsetType = UNSET
    configOptions: list[dict[str, Any]] | UnsetType = UNSET
    availableCommands: list[Command] | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# ``session/status``, ``session/set_title``, ``session/archive`` / ``unarchive`` /
# ``delete``: v1's unstable shapes (:mod:`bridge.acp.sessions`).


class ToolCallCancelParams(_Base):
    sessionId: str
    toolCallId: str


class TerminalCancelParams(_Base):
    sessionId: str
    terminalId: str


class Empty(_Base):
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- AIR's task updates ----------------------------------------------------------------------------


class AsyncTaskSpawned(air.AsyncTaskSpawned, tag="_async_task_spawned"):
    """v2 takes an extension update only with a ``_`` name."""


class AsyncTaskStateUpdate(air.AsyncTaskStateUpdate, tag="_async_task_state_update"):
    pass
