"""Codex's tool items and the notifications that follow them (Codex 0.169, protocol v2).

The bridge shows these as ACP tool calls (``bridge/engine/tools.py``). Hand-written
from the generated schema (``ThreadItem`` and friends), for the members the bridge
uses. As in :mod:`bridge.codex.types`, unknown fields are ignored, and the open
enums (statuses, command actions, web search actions) are kept as plain strings or
loose structs, so a newer Codex never makes a known item undecodable.

``collabAgentToolCall`` (sub-agents) is here too, as :class:`CollabAgentToolCallItem`;
the sub-agent feature reads it, the tool calls leave it alone.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from ..wire import WireStruct as _Base

# -- command execution ------------------------------------------------------------------


class CommandAction(_Base):
    """Codex's best-effort reading of one command of a shell line.

    ``type`` is ``read`` (``name``, ``path``), ``listFiles`` (``path``?), ``search``
    (``query``?, ``path``?) or ``unknown``; one struct for all, so a new type decodes.
    """

    type: str
    command: str = ""
    name: str | None = None
    path: str | None = None
    query: str | None = None


class CommandExecutionItem(_Base, tag="commandExecution", tag_field="type"):
    id: str
    #: The full command line Codex runs, shell wrapper and all (``/bin/bash -lc '...'``).
    command: str
    cwd: str = ""
    #: ``inProgress`` | ``completed`` | ``failed`` | ``declined``.
    status: str = "inProgress"
    commandActions: list[CommandAction] = msgspec.field(default_factory=list)
    #: stdout and stderr together; only on ``item/completed``.
    aggregatedOutput: str | None = None
    exitCode: int | None = None
    durationMs: int | None = None
    processId: str | None = None
    source: str = "agent"


# -- file changes ---------------------------------------------------------------------------


class PatchChangeKind(_Base):
    """``add`` | ``delete`` | ``update`` (with ``move_path`` when the file is renamed too)."""

    type: str
    move_path: str | None = None


class FileUpdateChange(_Base):
    """One file of a patch.

    ``diff`` depends on ``kind``: the whole new text for ``add``, the whole old text
    for ``delete``, and for ``update`` only unified-diff hunks (``@@ -a,b +c,d @@``,
    one line of context), possibly followed by a note such as ``Moved to: PATH``.
    """

    path: str
    kind: PatchChangeKind
    diff: str = ""


class FileChangeItem(_Base, tag="fileChange", tag_field="type"):
    id: str
    changes: list[FileUpdateChange] = msgspec.field(default_factory=list)
    #: ``inProgress`` | ``completed`` | ``failed`` | ``declined``.
    status: str = "inProgress"


# -- MCP and dynamic tools --------------------------------------------------------------------


class McpToolCallResult(_Base):
    #: MCP content blocks (text, image, audio, resource_link, resource): ACP's own shapes.
    content: list[Any] = msgspec.field(default_factory=list)
    structuredContent: Any = None


class McpToolCallError(_Base):
    message: str = ""


class McpToolCallItem(_Base, tag="mcpToolCall", tag_field="type"):
    id: str
    server: str
    tool: str
    #: ``inProgress`` | ``completed`` | ``failed``.
    status: str = "inProgress"
    arguments: Any = None
    result: McpToolCallResult | None = None
    error: McpToolCallError | None = None
    durationMs: int | None = None


class DynamicToolCallItem(_Base, tag="dynamicToolCall", tag_field="type"):
    """A call of a tool the client of app-server defined (``dynamicTools``)."""

    id: str
    tool: str
    namespace: str | None = None
    arguments: Any = None
    #: ``inProgress`` | ``completed`` | ``failed``.
    status: str = "inProgress"
    #: ``{type: inputText, text}`` | ``{type: inputImage, imageUrl}`` | ``{type: inputAudio, audioUrl}``.
    contentItems: list[dict[str, Any]] | None = None
    success: bool | None = None
    durationMs: int | None = None


# -- web search, image view, compaction ------------------------------------------------------------


class WebSearchAction(_Base):
    """``search`` (``query``, ``queries``), ``openPage`` (``url``), ``findInPage`` (``url``,
    ``pattern``) or ``other``; one struct for all."""

    type: str
    query: str | None = None
    queries: list[str] | None = None
    url: str | None = None
    pattern: str | None = None


class WebSearchItem(_Base, tag="webSearch", tag_field="type"):
    id: str
    #: Empty at ``item/started``: the query is known when the search is done.
    query: str = ""
    action: WebSearchAction | None = None
    results: list[Any] | None = None


class ImageViewItem(_Base, tag="imageView", tag_field="type"):
    id: str
    path: str


class ContextCompactionItem(_Base, tag="contextCompaction", tag_field="type"):
    id: str


ToolItem: TypeAlias = (
    CommandExecutionItem
    | FileChangeItem
    | McpToolCallItem
    | DynamicToolCallItem
    | WebSearchItem
    | ImageViewItem
    | ContextCompactionItem
)


class CollabAgentToolCallItem(_Base, tag="collabAgentToolCall", tag_field="type"):
    """A sub-agent operation of the thread that made it: spawn, send input, wait, close, resume."""

    id: str
    #: ``spawnAgent`` | ``sendInput`` | ``wait`` | ``closeAgent`` | ``resumeAgent``.
    tool: str
    status: str = ""
    senderThreadId: str = ""
    #: Empty at a spawn's ``item/started``: the child's id arrives at ``item/completed``.
    receiverThreadIds: list[str] = msgspec.field(default_factory=list)
    prompt: str | None = None
    #: Thread id → ``{status, message?}`` (what ``wait`` returned).
    agentsStates: dict[str, Any] = msgspec.field(default_factory=dict)


TOOL_ITEM_TYPES = frozenset(
    {
        "commandExecution",
        "fileChange",
        "mcpToolCall",
        "dynamicToolCall",
        "webSearch",
        "imageView",
        "contextCompaction",
    }
)


# -- notifications -------------------------------------------------------------------------------------


class CommandExecutionOutputDelta(_Base):
    """``item/commandExecution/outputDelta``: a piece of a running command's output."""

    threadId: str
    turnId: str
    itemId: str
    delta: str


class TerminalInteraction(_Base):
    """``item/commandExecution/terminalInteraction``: text written to a command's stdin."""

    threadId: str
    turnId: str
    itemId: str
    processId: str = ""
    stdin: str = ""


class FileChangePatchUpdated(_Base):
    """``item/fileChange/patchUpdated``: the changes of a patch still being written."""

    threadId: str
    turnId: str
    itemId: str
    changes: list[FileUpdateChange] = msgspec.field(default_factory=list)


class McpToolCallProgress(_Base):
    """``item/mcpToolCall/progress``."""

    threadId: str
    turnId: str
    itemId: str
    message: str = ""


class TurnPlanStep(_Base):
    step: str
    #: ``pending`` | ``inProgress`` | ``completed``.
    status: str = "pending"


class TurnPlanUpdated(_Base):
    """``turn/plan/updated``: the whole plan, each time."""

    threadId: str
    turnId: str
    plan: list[TurnPlanStep] = msgspec.field(default_factory=list)
    explanation: str | None = None


class ThreadNameUpdated(_Base):
    """``thread/name/updated``; ``threadName`` null clears the name."""

    threadId: str
    threadName: str | None = None
