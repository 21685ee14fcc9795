"""ACP v1: how a v1 client is spoken to, from the connection's start.

The features' updates are v1's shapes already, so each is sent as it is (the
hub sends them without calling the face: :attr:`V1Face.same`), but for one the
client may not take: Plan mode's proposed plan (``plan_update``, unstable) goes
to a client that declared ``clientCapabilities.plan``, and to any other as the
agent's message (:attr:`V1Face.render`). Of the facts
(:mod:`bridge.engine.core.facts`), v1 says only what answers a request: a
prompt's end is its ``PromptResult`` (or its error), a session opened is the
open's result. Its requests are the engine's table (``routes.v1_requests``),
each handler decoding v1's params once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ...acp import air
from ...acp import commands as acp_commands
from ...acp import permissions as acp_permissions
from ...acp import quota as acp_quota
from ...acp import settings as acp_settings
from ...acp import subagents as acp_subagents
from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...jsonrpc import RequestId, RpcError
from ..core import facts
from ..core.hub import Hub, RequestHandler
from ..core.outbox import update_effect

log = logging.getLogger(__name__)

#: Every ``session/update`` the features send, as v1 has it: sent as it is.
UPDATES: frozenset[type] = frozenset(
    {
        acp_types.AgentMessageChunk,
        acp_types.AgentThoughtChunk,
        acp_types.UserMessageChunk,
        acp_types.UsageUpdate,
        acp_types.Notice,
        acp_tools.ToolCall,
        acp_tools.ToolCallUpdate,
        acp_tools.Plan,
        acp_tools.SessionInfoUpdate,
        acp_tools.CompactionUpdate,
        acp_permissions.ToolCallStatusUpdate,
        acp_commands.AvailableCommandsUpdate,
        acp_settings.CurrentModeUpdate,
        acp_settings.ConfigOptionUpdate,
        acp_subagents.SubagentUpdate,
        acp_subagents.SessionMessage,
        air.AsyncTaskSpawned,
        air.AsyncTaskStateUpdate,
        acp_quota.QuotaUpdate,
    }
)


class V1Face:
    """The v1 rendering of one client connection (see the module docstring)."""

    version = 1
    same = UPDATES
    on_fact: ClassVar[dict[type, Callable[[V1Face, Any], None]]] = {}
    #: The updates whose v1 form depends on what the client declared.
    render: ClassVar[dict[type, Callable[[V1Face, str, Any], None]]] = {}

    def __init__(self, hub: Hub, requests: Mapping[str, RequestHandler]) -> None:
        self.hub = hub
        self.requests = requests

    def update(self, session_id: str, update: Any) -> None:
        # Only a type outside UPDATES comes here: never sent in another version's shape.
        render = self.render.get(type(update))
        if render is None:
            log.error("no ACP v1 rendering of %s: not sent", type(update).__name__)
            return
        render(self, session_id, update)

    def _plan_update(self, session_id: str, update: acp_tools.PlanUpdate) -> None:
        """The proposed plan: a plan to a client that takes ``plan_update``, else the
        agent's message (the plan's id its ``messageId``)."""
        if self.hub.handshake.client_capabilities.plan is not None:
            self.hub.client.emit(update_effect(session_id, update))
            return
        text = acp_types.TextContent(text=update.plan.content)
        message = acp_types.AgentMessageChunk(content=text, messageId=update.plan.planId)
        self.hub.client.emit(update_effect(session_id, message))

    def state(self, fact: facts.Fact) -> None:
        self.on_fact[type(fact)](self, fact)

    def _silent(self, fact: Any) -> None:
        """A prompt's insertion, a turn's start or end: v1 has no message for them
        (its prompt is answered at the end of its work)."""

    def _session_opened(self, fact: facts.SessionOpened) -> None:
        self.hub.client.answer(fact.request_id, fact.result)

    def _prompt_ended(self, fact: facts.PromptEnded) -> None:
        if isinstance(fact.outcome, RpcError):
            self.hub.client.respond_error(fact.request_id, fact.outcome)
        else:
            self.hub.client.respond(fact.request_id, fact.outcome)

    def answer(self, rid: RequestId, result: Any) -> None:
        self.hub.client.respond(rid, result)

    def refuse(self, rid: RequestId, error: RpcError) -> None:
        self.hub.threads.take_prompt(rid)  # a prompt refused so (a defect's) is held no more
        self.hub.client.respond_error(rid, error)

    def client_params(self, method: str, params: Any) -> Any:
        return params

    def asked(self, method: str, params: Any, rid: RequestId) -> None:
        pass  # v1 shows no work state

    def answered(self, rid: RequestId) -> None:
        pass


V1Face.render = {acp_tools.PlanUpdate: V1Face._plan_update}

#: How each fact is rendered for v1 (a fact of no type here is a defect, raised).
V1Face.on_fact = {
    facts.PromptInserted: V1Face._silent,
    facts.TurnStarted: V1Face._silent,
    facts.TurnEnded: V1Face._silent,
    facts.PromptEnded: V1Face._prompt_ended,
    facts.SessionOpened: V1Face._session_opened,
    facts.ToolCallCancelled: V1Face._silent,  # v1 offers no cancel of a tool call
}
