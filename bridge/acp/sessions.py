"""ACP v1 session lifecycle messages: ``session/load``, ``session/resume``,
``session/list``, ``session/close``, ``session/delete``, the unstable ``session/fork``,
``session/status``, ``session/set_title``, ``session/archive`` and ``session/unarchive``
(v2 has the last four with the same shapes), and the MCP servers a client hands a session.

Same conventions as :mod:`bridge.acp.types`: camelCase wire names, ``UNSET``
for "absent", unknown fields ignored on decode.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base
from .subagents import WorkState
from .types import Meta, NewSessionResult

# -- MCP servers ------------------------------------------------------------------
#
# ``McpServer`` is an untagged union on the wire: ``http`` and ``sse`` carry a
# ``type``, stdio carries none. :func:`decode_mcp_server` tells them apart.


class EnvVariable(_Base):
    name: str
    value: str


class HttpHeader(_Base):
    name: str
    value: str


class McpServerStdio(_Base):
    name: str
    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: list[EnvVariable] = msgspec.field(default_factory=list)


class McpServerHttp(_Base):
    name: str
    url: str
    headers: list[HttpHeader] = msgspec.field(default_factory=list)


class McpServerSse(_Base):
    name: str
    url: str
    headers: list[HttpHeader] = msgspec.field(default_factory=list)


McpServer = McpServerStdio | McpServerHttp | McpServerSse


class UnknownMcpServer(msgspec.Struct):
    """A transport this bridge does not know (e.g. the unstable ``acp``)."""

    type: str
    name: str


class _McpTag(msgspec.Struct):
    type: str = "stdio"
    name: str = ""


_MCP_KINDS: dict[str, type[McpServer]] = {
    "stdio": McpServerStdio,
    "http": McpServerHttp,
    "sse": McpServerSse,
}


def decode_mcp_server(entry: dict[str, Any]) -> McpServer | UnknownMcpServer:
    """One decoded ``McpServer`` object; a known transport with bad fields raises
    ``msgspec.ValidationError``."""
    tag = msgspec.convert(entry, type=_McpTag)
    kind = _MCP_KINDS.get(tag.type)
    if kind is None:
        return UnknownMcpServer(tag.type, tag.name)
    server: McpServer = msgspec.convert(entry, type=kind)
    return server


# -- requests --------------------------------------------------------------------


class _ExistingSessionParams(_Base):
    """Opening a session that exists: ``session/load``, ``session/resume`` and
    ``session/fork`` ask it in the same words."""

    sessionId: str
    cwd: str
    mcpServers: list[dict[str, Any]] | None = None
    additionalDirectories: list[str] | None = None


class LoadSessionParams(_ExistingSessionParams):
    pass


class ResumeSessionParams(_ExistingSessionParams):
    pass


class ForkSessionParams(_ExistingSessionParams):
    """Unstable: ``session/fork``."""

    #: AIR's fork point: ``{jetbrains: {air: {fork: {...}}}}`` (see bridge.acp.air).
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ListSessionsParams(_Base):
    cwd: str | None = None
    cursor: str | None = None
    #: Unstable: ``exclude`` (the default), ``include``, ``only``.
    archived: str | None = None


class CloseSessionParams(_Base):
    sessionId: str


class DeleteSessionParams(_Base):
    sessionId: str


class SessionParams(_Base):
    """Unstable: params naming one session and nothing else (``session/status``,
    ``session/archive``, ``session/unarchive``)."""

    sessionId: str


class SetSessionTitleParams(_Base):
    """Unstable: ``session/set_title``."""

    sessionId: str
    title: str


# -- results --------------------------------------------------------------------
#
# ``modes`` and ``configOptions`` are filled by the features that offer them
# (``engine.session_opened_hooks``), as for ``session/new``.


class LoadSessionResult(_Base):
    modes: Any = UNSET
    configOptions: Any = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ResumeSessionResult(LoadSessionResult):
    """The same answer as ``session/load``'s (only the history is not replayed)."""


class ForkSessionResult(NewSessionResult):
    """Unstable: ``session/fork`` answers as ``session/new`` does (the fork is a new session)."""


class SessionInfo(_Base):
    sessionId: str
    cwd: str
    title: str | None | UnsetType = UNSET
    #: ISO 8601, UTC.
    updatedAt: str | None | UnsetType = UNSET
    #: Unstable: on every row to a client told of ``sessionCapabilities.archive``.
    archived: bool | UnsetType = UNSET
    #: The session-list extensions proposal's row fields (bridge.engine.features.sessions.index).
    lastPromptAt: str | UnsetType = UNSET
    lastTurnEndedAt: str | UnsetType = UNSET
    state: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    forkedFrom: str | UnsetType = UNSET
    meta: Meta = msgspec.field(default=UNSET, name="_meta")


class ListChangedParams(_Base):
    """``session/list_changed``: page 1 of the list of ``cwd`` changed; read it again."""

    cwd: str


class ListSessionsResult(_Base):
    sessions: list[SessionInfo]
    nextCursor: str | None | UnsetType = UNSET


class CloseSessionResult(_Base):
    pass


class DeleteSessionResult(_Base):
    """``session/delete``'s answer (v1 and v2): ``{}``."""


class SessionStatusResult(_Base):
    """Unstable: ``session/status``'s answer, ``open`` or ``saved``."""

    status: str
    #: ACP v2 only: the session's work state, a ``StateUpdate`` snapshot (no tag).
    state: WorkState | None | UnsetType = UNSET


class SetSessionTitleResult(_Base):
    """Unstable: ``session/set_title``'s answer, the title stored (Codex stores it as given)."""

    title: str


class ArchiveSessionResult(_Base):
    """Unstable: ``session/archive``'s and ``session/unarchive``'s answer: ``{}``."""
