"""Asking the user: ``session/request_permission``, ``elicitation/create``, ``$/cancel_request``.

Hand-written from the official ACP v1 schema (``tests/schemas/acp/v1``), same conventions as
:mod:`bridge.acp.types`: camelCase wire names, ``UNSET`` for "absent", unknown fields ignored.

- ``session/request_permission`` (agent → client) names a tool call (a ``ToolCallUpdate``, which
  may carry enough to show the call by itself) and offers options; the client answers with the
  ``optionId`` the user picked, or ``cancelled`` (it must, for every request still open, after it
  sent ``session/cancel``).
- ``elicitation/create`` (agent → client) asks for a form (a restricted JSON Schema of strings,
  numbers, booleans and enums) or sends the user to a URL; only when the client declared
  ``clientCapabilities.elicitation.form`` / ``.url``. The answer is ``accept`` with ``content``,
  ``decline`` or ``cancel``.
- ``$/cancel_request`` (either way) withdraws a request the sender made; the receiver answers it
  (typically with error -32800) and drops its dialog.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

# A request names the tool call with the parts a ``session/update`` has (ACP's one set).
from .tools import Content as ContentToolCallContent
from .tools import ToolCallLocation as ToolCallLocation
from .tools import ToolCallStatus as ToolCallStatus
from .tools import ToolKind as ToolKind
from .types import Meta

# -- permission requests -------------------------------------------------------------

PermissionOptionKind: TypeAlias = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always"
]


class PermissionOption(_Base):
    optionId: str
    name: str
    kind: PermissionOptionKind
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ToolCallUpdate(_Base):
    """A tool call as a permission request names it (not a ``session/update``: no tag).

    Every field but the id replaces what the client knows of the call, so a request sets only
    what it knows to be true of the call at that moment.
    """

    toolCallId: str
    title: str | None | UnsetType = UNSET
    kind: ToolKind | None | UnsetType = UNSET
    status: ToolCallStatus | None | UnsetType = UNSET
    content: list[ContentToolCallContent] | None | UnsetType = UNSET
    locations: list[ToolCallLocation] | None | UnsetType = UNSET
    rawInput: Any = UNSET
    rawOutput: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ToolCallStatusUpdate(_Base, tag="tool_call_update", tag_field="sessionUpdate"):
    """A ``session/update`` that moves a tool call to a new status."""

    toolCallId: str
    status: ToolCallStatus


class RequestPermissionRequest(_Base):
    sessionId: str
    toolCall: ToolCallUpdate
    options: list[PermissionOption]
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class RequestPermissionOutcome(_Base):
    """``{"outcome": "cancelled"}`` or ``{"outcome": "selected", "optionId": ...}``."""

    outcome: str
    optionId: str | None = None


class RequestPermissionResponse(_Base):
    outcome: RequestPermissionOutcome


# -- elicitations -----------------------------------------------------------------------


class FormElicitationRequest(_Base, tag="form", tag_field="mode"):
    """``elicitation/create`` in form mode, tied to a session (and maybe one of its tool calls)."""

    sessionId: str
    message: str
    #: An ACP ``ElicitationSchema``: ``{type: "object", properties: {NAME: {type, title,
    #: description, enum | oneOf, ...}}, required: [...]}``.
    requestedSchema: dict[str, Any]
    toolCallId: str | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class UrlElicitationRequest(_Base, tag="url", tag_field="mode"):
    """``elicitation/create`` in URL mode: the user is sent to ``url`` (sign-ins, payments)."""

    sessionId: str
    message: str
    elicitationId: str
    url: str
    toolCallId: str | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class CreateElicitationResponse(_Base):
    """``accept`` (with ``content`` for a form), ``decline``, ``cancel``, or a future action."""

    action: str
    content: dict[str, Any] | None = None


# -- cancellation ---------------------------------------------------------------------------


class CancelRequestNotification(_Base):
    requestId: int | float | str
