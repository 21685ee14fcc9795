"""The engine's routing tables: what reacts to each Codex message, and to each client request.

:func:`codex_routes`: each Codex message → the type its params decode into → what reacts, in
order. The table for what Codex sends (:class:`~bridge.engine.core.codex_routing.CodexRouter`
reads it): a notification's or request's handlers among the features, with ``first`` for what
every connection hears of any thread, and the engine's own methods where one message has
several consequences in an order (``Engine.item_completed``, ``Engine.turn_completed``...).
:func:`v1_requests`: each ACP v1 client method → its handler. Apart from
:mod:`bridge.engine.engine` so that the wiring reads as the features it builds.
"""

from __future__ import annotations

from typing import Protocol

from ..acp import auth as acp_auth
from ..acp import steering as acp_steering
from ..codex import account as codex_account
from ..codex import approvals as codex_approvals
from ..codex import items as codex_items
from ..codex import mcp as codex_mcp
from ..codex import messages as codex_messages
from ..codex import palette as codex_palette
from ..codex import settings as codex_settings
from ..codex import threads as codex_threads
from ..codex import types as codex_types
from ..jsonrpc import RequestId
from .core.codex_routing import Route, notification, request
from .core.connection import Connection
from .core.hub import RequestHandler
from .features.approvals.approvals import Approvals
from .features.extensions.extensions import Extensions
from .features.prompts.file_reports import FileReports
from .features.prompts.prompts import Prompts
from .features.prompts.retries import Retries
from .features.prompts.streaming import Streaming
from .features.sessions.admin import SessionAdmin
from .features.sessions.auth import Authentication
from .features.sessions.index import SessionIndex
from .features.sessions.lifecycle import Lifecycle
from .features.sessions.mcp_servers import McpServers
from .features.sessions.opening import NewSessions
from .features.settings.machines import Machines
from .features.settings.settings import SettingsSelectors
from .features.subagents.subagents import Subagents
from .features.tools.tools import Tools


class Wiring(Protocol):
    """What the tables route to: the engine's features, and its methods where one message has
    several consequences in order (:class:`bridge.engine.engine.Engine` is one)."""

    connection: Connection
    approvals: Approvals
    auth: Authentication
    admin: SessionAdmin
    extensions: Extensions
    file_reports: FileReports
    lifecycle: Lifecycle
    machines: Machines
    mcp_servers: McpServers
    new_sessions: NewSessions
    prompts: Prompts
    retries: Retries
    session_index: SessionIndex
    settings: SettingsSelectors
    streaming: Streaming
    subagents: Subagents
    tools: Tools

    def after_catalog(self, handler: RequestHandler) -> RequestHandler: ...
    def current_time_read(
        self, rid: RequestId, params: codex_types.CurrentTimeReadParams
    ) -> None: ...
    def item_started(self, note: codex_messages.ItemNotification) -> None: ...
    def item_completed(self, note: codex_messages.ItemNotification) -> None: ...
    def turn_started(self, note: codex_types.TurnNotification) -> None: ...
    def turn_completed_anywhere(self, note: codex_types.TurnNotification) -> None: ...
    def turn_completed(self, note: codex_types.TurnNotification) -> None: ...


def codex_routes(engine: Wiring) -> dict[str, Route]:
    """Each Codex method ``engine`` hears → its route (see the module docstring)."""
    streaming, tools, approvals, subagents = (
        engine.streaming,
        engine.tools,
        engine.approvals,
        engine.subagents,
    )
    # What every connection hears of any thread (the session list's rows): ``first``.
    index, ext = engine.session_index, engine.extensions
    types, items, approval = codex_types, codex_items, codex_approvals
    gone = notification(
        codex_threads.ThreadGone,
        engine.lifecycle.thread_gone,
        subagents.thread_gone,
        first=(index.thread_gone,),
        gated=False,
    )
    return {
        "item/agentMessage/delta": notification(
            types.AgentMessageDelta, streaming.agent_message_delta
        ),
        "item/reasoning/summaryTextDelta": notification(
            types.ReasoningSummaryTextDelta, streaming.reasoning_delta
        ),
        "item/reasoning/summaryPartAdded": notification(
            types.ReasoningSummaryPartAdded, streaming.reasoning_part_added
        ),
        # What one item's or turn's start or end does is one method below, read in order.
        "item/started": notification(codex_messages.ItemNotification, engine.item_started),
        "item/completed": notification(codex_messages.ItemNotification, engine.item_completed),
        "turn/started": notification(types.TurnNotification, engine.turn_started),
        "turn/completed": notification(
            types.TurnNotification,
            engine.turn_completed,
            first=(engine.turn_completed_anywhere,),
        ),
        "thread/tokenUsage/updated": notification(
            types.ThreadTokenUsageUpdated, streaming.token_usage
        ),
        "error": notification(types.ErrorNotification, engine.retries.error),
        "item/commandExecution/outputDelta": notification(
            items.CommandExecutionOutputDelta, tools.output_delta
        ),
        "item/commandExecution/terminalInteraction": notification(
            items.TerminalInteraction, tools.terminal_interaction
        ),
        "item/fileChange/patchUpdated": notification(
            items.FileChangePatchUpdated, tools.patch_updated
        ),
        "item/mcpToolCall/progress": notification(items.McpToolCallProgress, tools.mcp_progress),
        "turn/plan/updated": notification(items.TurnPlanUpdated, tools.plan_updated),
        "turn/diff/updated": notification(types.TurnDiffUpdated, engine.file_reports.diff_updated),
        "thread/name/updated": notification(
            items.ThreadNameUpdated, tools.thread_name_updated, first=(index.name_updated,)
        ),
        "thread/started": notification(types.ThreadStarted, first=(index.thread_started,)),
        "thread/environment/connected": notification(
            types.EnvironmentConnection, engine.machines.environment_connected
        ),
        "thread/environment/disconnected": notification(
            types.EnvironmentConnection, engine.machines.environment_disconnected
        ),
        # A thread deleted or archived is gone from here alike.
        "thread/deleted": gone,
        "thread/archived": gone,
        # Not gated: the end of a thread no session shows is not held, nor read (the
        # reactor forgets its record, if it has one).
        "thread/closed": notification(
            codex_threads.ThreadGone,
            subagents.thread_gone,
            first=(index.thread_closed,),
            gated=False,
        ),
        "serverRequest/resolved": notification(approval.ServerRequestResolved, approvals.resolved),
        "thread/status/changed": notification(
            types.ThreadStatusChanged, subagents.status_changed, first=(index.status_changed,)
        ),
        "thread/settings/updated": notification(
            codex_settings.ThreadSettingsUpdated, engine.settings.settings_updated
        ),
        "account/login/completed": notification(
            codex_account.AccountLoginCompleted, engine.auth.login_completed
        ),
        "account/updated": notification(codex_account.AccountUpdated, engine.auth.account_updated),
        "account/rateLimits/updated": notification(
            codex_palette.RateLimitsUpdated, ext.rate_limits_updated
        ),
        "mcpServer/startupStatus/updated": notification(
            codex_mcp.McpServerStartupStatus, engine.mcp_servers.startup_status
        ),
        # Not gated: a sign-in is the server's, whichever thread started it.
        "mcpServer/oauthLogin/completed": notification(
            codex_mcp.McpServerOauthLoginCompleted,
            engine.mcp_servers.oauth_completed,
            gated=False,
        ),
        "item/commandExecution/requestApproval": request(
            approval.CommandExecutionRequestApprovalParams,
            approvals.command_approval,
        ),
        "item/fileChange/requestApproval": request(
            approval.FileChangeRequestApprovalParams, approvals.file_change_approval
        ),
        "item/permissions/requestApproval": request(
            approval.PermissionsRequestApprovalParams,
            approvals.permissions_approval,
        ),
        "item/tool/requestUserInput": request(
            approval.ToolRequestUserInputParams, approvals.user_input
        ),
        "mcpServer/elicitation/request": request(
            approval.McpServerElicitationRequestParams, approvals.mcp_elicitation
        ),
        # Codex sends these only for turns started with its removed v1 API
        # (sendUserTurn); this bridge starts turns with turn/start only.
        "execCommandApproval": request(
            codex_messages.LegacyApprovalParams, approvals.legacy_approval
        ),
        "applyPatchApproval": request(
            codex_messages.LegacyApprovalParams, approvals.legacy_approval
        ),
        # Codex 0.169 (experimental); any thread's, as the time is nobody's.
        "currentTime/read": request(
            types.CurrentTimeReadParams, engine.current_time_read, gated=False
        ),
    }


def v1_requests(engine: Wiring) -> dict[str, RequestHandler]:
    """Each client method → its handler, as ACP v1 has it (v2's is
    :func:`bridge.engine.faces.v2_requests.requests`, over the same features)."""
    return {
        "initialize": engine.connection.initialize,
        "authenticate": engine.auth.authenticate,
        "session/new": engine.after_catalog(engine.new_sessions.session_new),
        "session/prompt": engine.file_reports.asking(engine.prompts.session_prompt),
        "session/load": engine.after_catalog(engine.lifecycle.session_load),
        "session/resume": engine.after_catalog(engine.lifecycle.session_resume),
        "session/fork": engine.after_catalog(engine.lifecycle.session_fork),
        "session/list": engine.lifecycle.session_list,
        "session/close": engine.lifecycle.session_close,
        "session/delete": engine.admin.session_delete,
        "session/status": engine.admin.session_status,
        "session/set_title": engine.admin.session_set_title,
        "session/archive": engine.admin.session_archive,
        "session/unarchive": engine.admin.session_unarchive,
        "logout": engine.admin.session_logout,
        acp_auth.STATUS: engine.auth.status,
        "session/set_mode": engine.settings.set_mode,
        "session/set_config_option": engine.settings.set_config_option,
        acp_steering.METHOD: engine.prompts.steering.steer,
    }
