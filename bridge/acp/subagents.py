"""ACP's Subagent Sessions (unstable v1): association updates and session messages.

From ``schema.unstable.json`` (``SubagentUpdate``, ``StateUpdate``,
``SessionMessage``). Optional fields are patches: ``UNSET`` leaves a value
unchanged, ``None`` clears it; the encoder leaves ``UNSET`` out.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .types import ContentBlock, Meta


class SubagentCapabilities(_Base):
    """What the client may do to a child; ``cancel`` set to ``{}`` advertises ``session/cancel``."""

    cancel: dict[str, Any] | None = None


class WorkState(_Base):
    """A ``StateUpdate`` snapshot: ``running``, ``requires_action``, ``idle``, ``unknown``."""

    state: str
    stopReason: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SubagentUpdate(_Base, tag="subagent_update", tag_field="sessionUpdate"):
    sessionId: str
    title: str | None | UnsetType = UNSET
    # In the RFD, not yet in the SDK 2.4.0 schema (which allows extra members).
    description: str | None | UnsetType = UNSET
    capabilities: SubagentCapabilities | None | UnsetType = UNSET
    state: WorkState | None | UnsetType = UNSET
    cwd: str | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class SessionMessage(_Base, tag="session_message", tag_field="sessionUpdate"):
    messageId: str
    senderSessionId: str | None | UnsetType = UNSET
    recipientSessionId: str | None | UnsetType = UNSET
    senderMessageId: str | None | UnsetType = UNSET
    recipientMessageId: str | None | UnsetType = UNSET
    content: list[ContentBlock] | None | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


def announcement(session_id: str, title: str | None, description: str | None) -> SubagentUpdate:
    """A child's association on its parent's stream; an empty title or description is left out."""
    return SubagentUpdate(
        sessionId=session_id,
        title=title if title else UNSET,
        description=description if description else UNSET,
    )
