"""Codex app-server messages about the MCP servers a thread uses: their startup
(``mcpServer/startupStatus/updated``) and an OAuth sign-in to one
(``mcpServer/oauth/login``, ``mcpServer/oauthLogin/completed``). Same conventions as
:mod:`bridge.codex.types`. ``/mcp``'s listing is :mod:`bridge.codex.palette`'s.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

#: ``McpServerStartupFailureReason``: the server wants the user to sign in (again).
REAUTHENTICATION_REQUIRED = "reauthenticationRequired"


class McpServerStartupStatus(_Base):
    """``mcpServer/startupStatus/updated``: one server of a thread is ``starting``,
    ``ready``, ``failed`` or ``cancelled``; a failure says why (``error``) and, where
    Codex knows a remedy, ``failureReason``."""

    name: str
    status: str
    #: The thread whose runtime started it (Codex 0.169 on names it).
    threadId: str | None = None
    error: str | None = None
    failureReason: str | None = None
    environmentId: str | None = None


class McpServerOauthLoginParams(_Base):
    """``mcpServer/oauth/login``: Codex answers the page that signs the user in, and
    listens for the sign-in's redirect itself."""

    name: str
    threadId: str | UnsetType = UNSET


class McpServerOauthLoginResult(_Base):
    authorizationUrl: str
    #: Names the attempt in ``mcpServer/oauthLogin/completed`` (older Codex: absent).
    loginId: str | None = None


class McpServerOauthLoginCompleted(_Base):
    """``mcpServer/oauthLogin/completed``: the sign-in to server ``name`` ended."""

    name: str
    success: bool
    threadId: str | None = None
    loginId: str | None = None
    error: str | None = None
