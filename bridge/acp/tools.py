"""ACP v1 tool calls, plans and session info: the updates that show an agent at work.

Hand-written from the official schema (``ToolCall``, ``ToolCallUpdate``,
``ToolCallContent``, ``Plan``, the unstable ``PlanUpdate``, ``SessionInfoUpdate``, ``CompactionUpdate``, and
``fs/read_text_file``), with the conventions of :mod:`bridge.acp.types`: ``UNSET``
is "absent on the wire", distinct from ``None`` (``null``), which matters for a
``tool_call_update``: an absent field keeps its value, ``content`` and
``locations`` given replace the whole collection.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import ContentBlock, Meta

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolCallStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]


# -- what a tool call holds ------------------------------------------------------------------


class ToolCallLocation(_Base):
    """A file the tool touches (absolute path; ``line`` is 1-based): clients follow along."""

    path: str
    line: int | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class Content(_Base, tag="content", tag_field="type"):
    """An ordinary content block (text, image, resource...) inside a tool call."""

    content: ContentBlock
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class Diff(_Base, tag="diff", tag_field="type"):
    """A file change: ``oldText`` null for a new file, ``newText`` empty for a deleted one."""

    path: str
    newText: str
    oldText: str | None = None
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class DeletedFile(Diff, tag="diff", tag_field="type"):
    """A deleted file's ``Diff``: the same on the wire (v1 says "deleted" only by the empty
    ``newText``), so that ACP v2 can say ``delete`` (:mod:`bridge.engine.faces.v2`)."""


class Terminal(_Base, tag="terminal", tag_field="type"):
    """A terminal shown in the tool call, by id."""

    terminalId: str
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


ToolCallContent: TypeAlias = Content | Diff | Terminal


# -- the updates ---------------------------------------------------------------------------------


class _ToolCallMembers(_Base, kw_only=True):
    """What a tool call and a change to it both carry, after ``toolCallId`` and ``title``.

    ``kw_only``: msgspec puts a class's keyword-only members after its subclasses' own, so
    these go out last, in the order ACP lists them.
    """

    #: The tool's programmatic name (Codex's item kind, or the MCP or dynamic tool's name).
    name: str | None | UnsetType = UNSET
    kind: ToolKind | UnsetType = UNSET
    status: ToolCallStatus | UnsetType = UNSET
    content: list[ToolCallContent] | UnsetType = UNSET
    locations: list[ToolCallLocation] | UnsetType = UNSET
    rawInput: Any = UNSET
    rawOutput: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ToolCall(_ToolCallMembers, tag="tool_call", tag_field="sessionUpdate"):
    """A new tool call (``toolCallId`` unique in the session), with all it knows so far."""

    toolCallId: str
    title: str


class ToolCallUpdate(_ToolCallMembers, tag="tool_call_update", tag_field="sessionUpdate"):
    """A change to a tool call: only the fields given change (``content``, ``locations``
    replace the whole collection)."""

    toolCallId: str
    title: str | UnsetType = UNSET


PlanEntryStatus: TypeAlias = Literal["pending", "in_progress", "completed"]
PlanEntryPriority: TypeAlias = Literal["high", "medium", "low"]


class PlanEntry(_Base):
    content: str
    priority: PlanEntryPriority
    status: PlanEntryStatus
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class Plan(_Base, tag="plan", tag_field="sessionUpdate"):
    """The whole plan; each one replaces the last."""

    entries: list[PlanEntry]
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class PlanMarkdown(_Base, tag="markdown", tag_field="type"):
    """A plan as Markdown (unstable), by its id: a later one of the same id replaces it."""

    planId: str
    content: str
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class PlanUpdate(_Base, tag="plan_update", tag_field="sessionUpdate"):
    """A plan by id (unstable ``plan_update``), here always Markdown: Plan mode's proposed
    plan. Only for a client that declared ``clientCapabilities.plan``; any other v1 client
    is shown the plan as the agent's message (:mod:`bridge.engine.faces.v1`)."""

    plan: PlanMarkdown
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SessionInfoUpdate(_Base, tag="session_info_update", tag_field="sessionUpdate"):
    """Session metadata; ``title`` null clears it, absent leaves it."""

    title: str | None | UnsetType = UNSET
    updatedAt: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


CompactionStatus: TypeAlias = Literal["in_progress", "completed", "failed", "cancelled"]


class CompactionUpdate(_Base, tag="compaction_update", tag_field="sessionUpdate"):
    """A context compaction, by id; only for clients that declared ``session.compaction``."""

    compactionId: str
    status: CompactionStatus
    error: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


# -- fs/read_text_file (agent → client) ------------------------------------------------------------


class ReadTextFileParams(_Base):
    sessionId: str
    path: str
    line: int | None | UnsetType = UNSET
    limit: int | None | UnsetType = UNSET


class ReadTextFileResult(_Base):
    content: str
