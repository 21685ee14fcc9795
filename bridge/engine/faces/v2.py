"""ACP v2 (draft): how a v2 client is spoken to, by the same features as a v1 client.

``initialize`` negotiating version 2 gives the hub a :class:`V2Face` (a v1 face
speaks until then). The features state what happened once, in no version's
words (:mod:`bridge.engine.core.facts`, and the session updates the views
build); this face renders each in v2's messages, and decodes v2's requests once
for the features that do them (:mod:`bridge.engine.faces.v2_requests`). What v2
keeps of a session (the prompts in flight and the messages they became, the work
state last reported, the permission requests the client holds, the tool calls
that can be cancelled) lives in the session's record and is forgotten with it.

What v2 changes, and how it is kept:

1. **A prompt is answered when it is inserted** (:class:`~facts.PromptInserted`),
   with the user message's id. When, and under which id, is the prompts
   feature's to say (:mod:`bridge.engine.features.prompts.prompts`): Codex's
   ``userMessage`` item for an ordinary prompt, with that item's id (the one
   history replays it under); a slash command when Codex accepts its request,
   or at once when the bridge answers it itself, with an id of the bridge's; a
   prompt whose turn sends a tool call or a plan before its user message item,
   just before it. The answer is followed by the ``user_message`` echo and
   ``state_update: running``. The end of its work (:class:`~facts.PromptEnded`)
   becomes ``state_update: idle`` with its stop reason and the tokens its turn used
   (``usage``), or with ``stopReason: "error"`` and the error. A prompt that waits behind a running one is not inserted yet:
   a cancel answers it -32800 (request cancelled), and a failure before
   insertion is its error.
2. **Work state on every session**, by :func:`workstate.foreground`:
   ``running`` from insertion (or from a turn Codex started with no prompt of
   this client's), ``requires_action`` while the client holds a permission
   request or a question of the session (also one asked after its work, Plan
   mode's "Implement this plan?"), ``idle`` at the end and once it is answered. A sub-agent's state is the
   engine's own report (``subagent_update.state`` on the parent); v2 also sends
   it as the child's ``state_update``, after the parent's copy (so a child is
   never spoken of before it is announced).
3. **Resume replaces load** (see :mod:`~bridge.engine.faces.v2_requests`). A
   resumed session's current ``state_update`` (:func:`workstate.snapshot`) goes
   out just before the answer.
4. **Shapes.** ``tool_call`` becomes a ``tool_call_update`` upsert; a diff
   becomes structured changes plus a git patch; ``plan`` becomes
   ``plan_update`` (items, id ``plan``), and Plan mode's proposed plan a
   ``plan_update`` in Markdown under the plan item's id; commands, config options and auth methods take their v2
   form; modes do not exist in v2 (the mode is a config option already). A
   command of kind ``execute`` is a terminal of the agent's: the tool call's content
   names it, ``terminal_update`` and ``terminal_output_chunk`` carry it
   (:mod:`bridge.engine.views.tool_views`); an answer ends with its ``agent_message``
   upsert, the whole text as shown (:mod:`bridge.engine.features.prompts.streaming`). A
   running command advertises ``cancel`` (``tool_call/cancel``, done by
   :mod:`bridge.engine.features.sessions.admin`) until its final status. An
   update of a type this face has no rendering for is not sent (and logged):
   never a v1 shape to a v2 client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec
from msgspec import UNSET

from ...acp import air, v2
from ...acp import commands as acp_commands
from ...acp import permissions as acp_permissions
from ...acp import quota as acp_quota
from ...acp import sessions as acp_sessions
from ...acp import settings as acp_settings
from ...acp import subagents as acp_subagents
from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...codex.threads import LIST_BACKGROUND_TERMINALS
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ..core import facts, workstate
from ..core.hub import Hub, RequestHandler
from ..core.outbox import update_effect
from ..core.record_parts import TurnKind
from ..core.threads import ThreadRecord

log = logging.getLogger(__name__)

#: Requests for the client that wait on the user: the session ``requires_action`` meanwhile.
ASKS_USER = frozenset({"session/request_permission", "elicitation/create"})

#: Tool call statuses after which a call can no longer be cancelled.
FINAL = ("completed", "failed", "cancelled")


class V2Face:
    """The v2 rendering of one client connection (see the module docstring)."""

    version = 2
    #: Sent as they are: the hub does not call :meth:`update` for them.
    same: frozenset[type] = frozenset()
    on_fact: ClassVar[dict[type, Callable[[V2Face, Any], None]]] = {}
    render: ClassVar[dict[type, Callable[[V2Face, str, Any], None]]] = {}

    def __init__(self, hub: Hub, requests: Mapping[str, RequestHandler], *, fork: bool) -> None:
        self.hub = hub
        self.requests = requests
        self.fork = fork

    # -- initialize -------------------------------------------------------------------------

    def initialize_result(
        self, info: acp_types.Implementation, auth_methods: list[acp_types.AuthMethod]
    ) -> v2.InitializeResult:
        session = v2.SessionCapabilities(
            prompt=v2.PromptCapabilities(image={}, embeddedContext={}),
            # Codex's transports, both passed on as ``config.mcp_servers``; any other is
            # refused -32602, as v2 has it (:mod:`bridge.engine.features.sessions._thread_config`).
            mcp={"http": {}, "stdio": {}},
            archive={},
            delete={},
            status={},
            title={},
            # Honoured on new, resume and fork (:mod:`bridge.engine.features.sessions.lifecycle`).
            additionalDirectories={},
        )
        if self.fork:
            session.fork = {}
        return v2.InitializeResult(
            protocolVersion=2,
            info=v2.Implementation(name=info.name, title=info.title, version=info.version),
            # auth/status is unstable, and every v2 client speaks the unstable schema.
            capabilities=v2.AgentCapabilities(session=session, auth={"status": {}}),
            authMethods=[
                v2.AuthMethod(
                    type=m.type if isinstance(m.type, str) else "agent",
                    methodId=m.id,
                    name=m.name,
                    description=m.description,
                    args=m.args,
                    vars=UNSET
                    if m.vars is UNSET
                    else [
                        v2.AuthEnvVar(name=v.name, label=v.label, secret=v.secret) for v in m.vars
                    ],
                )
                for m in auth_methods
            ],
        )

    # -- facts ------------------------------------------------------------------------------

    def state(self, fact: facts.Fact) -> None:
        self.on_fact[type(fact)](self, fact)

    def _inserted(self, fact: facts.PromptInserted) -> None:
        """The prompt's work began (see rule 1): its answer, the user message echo, and
        the session's work state."""
        record = fact.record
        self.hub.client.respond(fact.request_id, v2.PromptResult(messageId=fact.message_id))
        self._emit(record.id, v2.UserMessage(messageId=fact.message_id, content=fact.content))
        record.shown.working += 1
        record.shown.turn_elsewhere = None  # a turn Codex reported first is this prompt's
        self._show_state(record)

    def _prompt_ended(self, fact: facts.PromptEnded) -> None:
        record, rid, prompt, outcome = fact.record, fact.request_id, fact.prompt, fact.outcome
        hub = self.hub
        if isinstance(outcome, RpcError):
            if prompt is None or prompt.message_id is None:
                hub.client.respond_error(rid, outcome)
                return
            error = v2.Error(
                code=outcome.code,
                message=outcome.message,
                data=outcome.data if outcome.data is not None else UNSET,
            )
            self._ended(record, v2.StateUpdate(state="idle", stopReason="error", error=error))
            return
        if prompt is None or prompt.message_id is None:
            # Answered before insertion: a queued prompt cancelled, never inserted.
            stop = outcome.stopReason
            hub.client.respond_error(
                rid,
                RpcError(
                    ErrorCode.REQUEST_CANCELLED,
                    "Request cancelled: the prompt was cancelled before it was inserted"
                    if stop == "cancelled"
                    else f"the prompt ended ({stop}) before it was inserted",
                ),
            )
            return
        self._ended(
            record,
            v2.StateUpdate(state="idle", stopReason=outcome.stopReason, usage=outcome.usage),
        )

    def _ended(self, record: ThreadRecord, state: v2.StateUpdate) -> None:
        record.shown.working = max(0, record.shown.working - 1)
        if record.shown.working:
            return  # another inserted prompt's work goes on
        _work_ended(record)
        self._emit(record.id, state)

    def _turn_started(self, fact: facts.TurnStarted) -> None:
        """A turn no prompt of this client's started (a goal's, or another client's on a
        shared thread) is work too."""
        record = self.hub.threads.session(fact.thread_id)
        if record is None or record.is_child:
            return  # a child's state is the engine's report (see _subagent)
        if record.shown.working or record.shown.turn_elsewhere is not None:
            return
        record.shown.turn_elsewhere = fact.turn_id
        self._show_state(record)

    def _turn_ended(self, fact: facts.TurnEnded) -> None:
        """The end of such a turn: ``idle`` with its stop reason."""
        record = self.hub.threads.session(fact.thread_id)
        if record is None or record.shown.turn_elsewhere not in (fact.turn_id, workstate.ANY_TURN):
            return
        record.shown.turn_elsewhere = None
        if record.shown.working:
            return
        _work_ended(record)
        outcome = workstate.turn_outcome(fact.status, fact.error)
        self._emit(
            record.id,
            v2.StateUpdate(
                state="idle",
                stopReason=outcome.stopReason if outcome.stopReason is not None else "error",
                error=v2.Error(
                    code=ErrorCode.INTERNAL_ERROR, message=fact.error or f"turn {fact.status}"
                )
                if outcome.stopReason is None
                else UNSET,
            ),
        )

    def _call_cancelled(self, fact: facts.ToolCallCancelled) -> None:
        fact.record.shown.cancelled_calls.add(fact.call_id)

    def _session_opened(self, fact: facts.SessionOpened) -> None:
        result = fact.result
        if type(result) in (acp_sessions.LoadSessionResult, acp_sessions.ResumeSessionResult):
            # Current state after any replay, before the answer (v2's resume rule).
            self._resumed(fact.record)
        self.hub.client.answer(fact.request_id, _opened(result))

    def _resumed(self, record: ThreadRecord) -> None:
        """The resumed session's state now. A turn Codex still runs (left by a client of a
        shared Codex) is work: ``running``, or ``requires_action`` while it waits on the
        user; its end is reported as a Codex-started turn's is."""
        # The same rules as a sub-agent's state (Codex's status, the turn, what waits).
        state = workstate.snapshot(record).state
        if (record.turn is None or record.turn.kind is TurnKind.FOREIGN) and state != "idle":
            record.shown.turn_elsewhere = workstate.ANY_TURN  # Codex's turn, not one started here
        record.shown.state = state
        self._emit(record.id, v2.StateUpdate(state=state), force=True)

    # -- answers and requests ---------------------------------------------------------------

    def answer(self, rid: RequestId, result: Any) -> None:
        if type(result) is acp_settings.SetSessionConfigOptionResult:
            result = v2.SessionOpened(configOptions=config_options(result.configOptions))
        self.hub.client.respond(rid, result)

    def refuse(self, rid: RequestId, error: RpcError) -> None:
        """An error for ``rid`` no feature sent as a prompt's end (a defect's, most often):
        a prompt already inserted ends in it (its state says it)."""
        held = self.hub.threads.take_prompt(rid)
        if held is None:
            self.hub.client.respond_error(rid, error)
            return
        record, prompt = held
        self._prompt_ended(facts.PromptEnded(record, rid, prompt, error))

    def client_params(self, method: str, params: Any) -> Any:
        """A permission request in v2 form; any other request as it is."""
        if isinstance(params, acp_permissions.RequestPermissionRequest):
            return _permission(params)
        return params

    def asked(self, method: str, params: Any, rid: RequestId) -> None:
        """While the client holds a permission request or a question, its session
        ``requires_action``."""
        session_id = getattr(params, "sessionId", None)
        if method not in ASKS_USER or not isinstance(session_id, str):
            return
        record = self.hub.threads.session(session_id)
        if record is None:
            return
        record.shown.asking.add(rid)
        if record.parent_id is None:
            self._show_state(record)

    def answered(self, rid: RequestId) -> None:
        """The client answered a request that made its session ``requires_action``: the
        session's state follows (before the answer is acted on)."""
        # Rare (a person answers), so the sessions are looked through: the face keeps
        # nothing of a session.
        record = next((r for r in self.hub.threads.sessions() if rid in r.shown.asking), None)
        if record is None:
            return
        record.shown.asking.discard(rid)
        if record.parent_id is None:
            self._show_state(record)

    # -- updates ----------------------------------------------------------------------------

    def update(self, session_id: str, update: Any) -> None:
        """Send the v2 form of one update (some become two, some none). The hub sends
        the :attr:`same` ones itself, without calling this."""
        render = self.render.get(type(update))
        if render is None:
            log.error("no ACP v2 rendering of %s: not sent", type(update).__name__)
            return
        render(self, session_id, update)

    def _as_is(self, session_id: str, update: Any) -> None:
        self.hub.client.emit(update_effect(session_id, update))

    def _async_task(
        self, session_id: str, update: air.AsyncTaskSpawned | air.AsyncTaskStateUpdate
    ) -> None:
        """AIR's task updates, under the ``_`` names v2 takes for an extension."""
        fields = {f: getattr(update, f) for f in update.__struct_fields__}
        rendered = (
            v2.AsyncTaskSpawned(**fields)
            if isinstance(update, air.AsyncTaskSpawned)
            else v2.AsyncTaskStateUpdate(**fields)
        )
        self.hub.client.emit(update_effect(session_id, rendered))

    def _dropped(self, session_id: str, update: Any) -> None:
        """An update v2 has no counterpart of (modes: the mode is a config option)."""

    def _tool_call(self, session_id: str, update: Any) -> None:
        record = self.hub.threads.session(session_id)
        if record is not None:
            update = self._tool_update(record, update)
        self.hub.client.emit(update_effect(session_id, update))

    def _plan(self, session_id: str, update: acp_tools.Plan) -> None:
        # One plan per session (Codex's turn plan): every update replaces it.
        plan = v2.PlanItems(planId="plan", entries=list(update.entries))
        self.hub.client.emit(update_effect(session_id, v2.PlanUpdate(plan=plan, meta=update.meta)))

    def _proposed_plan(self, session_id: str, update: acp_tools.PlanUpdate) -> None:
        # Plan mode's proposed plan: Markdown, under its own id (apart from the turn plan's).
        plan = v2.PlanMarkdown(planId=update.plan.planId, content=update.plan.content)
        self.hub.client.emit(update_effect(session_id, v2.PlanUpdate(plan=plan, meta=update.meta)))

    def _commands(self, session_id: str, update: acp_commands.AvailableCommandsUpdate) -> None:
        rendered = v2.AvailableCommandsUpdate(availableCommands=commands(update.availableCommands))
        self.hub.client.emit(update_effect(session_id, rendered))

    def _config(self, session_id: str, update: acp_settings.ConfigOptionUpdate) -> None:
        rendered = v2.ConfigOptionUpdate(configOptions=config_options(update.configOptions))
        self.hub.client.emit(update_effect(session_id, rendered))

    def _subagent(self, session_id: str, update: acp_subagents.SubagentUpdate) -> None:
        self.hub.client.emit(update_effect(session_id, update))
        state = update.state
        if isinstance(state, acp_subagents.WorkState):
            # The child's own stream carries its state too, after the parent's copy.
            child = self.hub.threads.session(update.sessionId)
            if child is not None:
                child.shown.state = state.state
            self._emit(update.sessionId, _state_update(state))

    def _tool_update(self, record: ThreadRecord, update: Any) -> msgspec.Struct:
        """A tool call's v2 upsert. A command running on a session the client may act on
        advertises ``cancel`` until its final status."""
        call_id = update.toolCallId
        status = update.status
        kind = type(update)
        capabilities: Any = UNSET
        if (
            kind is acp_tools.ToolCall
            and _is_command(update)
            and status in ("pending", "in_progress")
            and LIST_BACKGROUND_TERMINALS not in self.hub.codex.unknown
            and not record.is_child
        ):
            record.shown.cancellable.add(call_id)
            capabilities = v2.ToolCallCapabilities(cancel={})
        elif status in ("completed", "failed") and call_id in record.shown.cancellable:
            record.shown.cancellable.discard(call_id)
            capabilities = None
            if status == "failed" and call_id in record.shown.cancelled_calls:
                status = "cancelled"
        if status in FINAL:
            record.shown.cancelled_calls.discard(call_id)
        if kind is acp_tools.ToolCallUpdate and capabilities is UNSET:
            return _with_v2_diffs(update)
        if kind is acp_permissions.ToolCallStatusUpdate:
            return v2.ToolCallUpdate(toolCallId=call_id, status=status, capabilities=capabilities)
        return v2.ToolCallUpdate(
            toolCallId=call_id,
            title=update.title,
            name=update.name,
            kind=update.kind,
            status=status,
            content=_content(update.content),
            locations=update.locations,
            rawInput=update.rawInput,
            rawOutput=update.rawOutput,
            capabilities=capabilities,
            meta=update.meta,
        )

    # -- helpers --------------------------------------------------------------------------------

    def _show_state(self, record: ThreadRecord) -> None:
        """Tell the client the session's work state, when it changed."""
        state = workstate.foreground(record)
        if record.shown.state == state:
            return
        record.shown.state = state
        self._emit(record.id, v2.StateUpdate(state=state))

    def _emit(self, session_id: str, update: msgspec.Struct, *, force: bool = False) -> None:
        if force or session_id in self.hub.threads.shown_ids:
            self.hub.client.emit(update_effect(session_id, update))


def _work_ended(record: ThreadRecord) -> None:
    """The session's work ended: ``idle`` goes out, and is what the client was shown. A
    question of that work the client still holds is withdrawn next (taken back, it
    changes nothing); one asked after it (Plan mode's) makes the session
    ``requires_action`` again."""
    record.shown.state = "idle"


# -- shapes ---------------------------------------------------------------------------------------


def _state_update(state: acp_subagents.WorkState) -> v2.StateUpdate:
    return v2.StateUpdate(
        state=state.state,
        stopReason=state.stopReason,
        meta=state.meta,
    )


def _content(items: Any) -> Any:
    """Tool call content in v2 form: a v1 diff (old and new text) becomes changes + a patch."""
    if items is UNSET or items is None:
        return items
    return [_diff(item) if isinstance(item, acp_tools.Diff) else item for item in items]


def _diff(diff: acp_tools.Diff) -> v2.Diff:
    """A v1 diff (old and new text of a file, or of one hunk with ``_meta.hunk`` giving
    its place) as v2's structured change plus a ``git_patch`` (absolute paths, no
    ``a/`` / ``b/`` prefixes, as the draft asks)."""
    old = diff.oldText
    deleted = isinstance(diff, acp_tools.DeletedFile)
    operation = "add" if old is None else "delete" if deleted else "modify"
    return v2.Diff(
        changes=[v2.DiffChange(operation=operation, path=diff.path)],
        patch=_git_patch(diff.path, old, diff.newText, diff.meta, deleted=deleted),
        meta=diff.meta,
    )


def _git_patch(
    path: str, old: str | None, new: str, meta: Any, *, deleted: bool = False
) -> v2.DiffPatch | None:
    import difflib  # imported only when a diff is shown

    before = (old or "").splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    # One hunk holding every line given (a v1 diff is a file, or one hunk already).
    lines = list(difflib.unified_diff(before, after, n=max(len(before), len(after))))
    if not lines:
        return None
    hunk = meta.get("hunk") if isinstance(meta, dict) else None
    header = [f"diff --git {path} {path}\n"]
    if old is None:
        header += ["new file mode 100644\n", "--- /dev/null\n"]
    elif deleted:
        header += ["deleted file mode 100644\n", f"--- {path}\n"]
    else:
        header.append(f"--- {path}\n")
    header.append("+++ /dev/null\n" if deleted else f"+++ {path}\n")
    body = []
    for line in lines[2:]:  # difflib's own ---/+++ lines are replaced by the header
        if line.startswith("@@") and isinstance(hunk, dict):
            line = (
                f"@@ -{hunk.get('oldStart', 1)},{len(before)} "
                f"+{hunk.get('newStart', 1)},{len(after)} @@\n"
            )
        body.append(line if line.endswith("\n") else line + "\n")
    return v2.DiffPatch(format="git_patch", text="".join(header + body))


def _is_command(update: acp_tools.ToolCall) -> bool:
    """A tool call of a Codex command (``commandExecution``): its raw input says so."""
    raw = update.rawInput
    return isinstance(raw, dict) and "commandActions" in raw


def _with_v2_diffs(update: acp_tools.ToolCallUpdate) -> acp_tools.ToolCallUpdate:
    if update.content is UNSET or not any(isinstance(c, acp_tools.Diff) for c in update.content):
        return update
    return msgspec.structs.replace(update, content=_content(update.content))


def commands(available: list[acp_commands.AvailableCommand]) -> list[v2.Command]:
    return [
        v2.Command(
            name=c.name,
            description=c.description,
            input=v2.TextCommandInput(hint=c.input.hint)
            if isinstance(c.input, acp_commands.UnstructuredCommandInput)
            else UNSET,
            meta=c.meta,
        )
        for c in available
    ]


def config_options(options: Any) -> list[dict[str, Any]]:
    """v1 config options (``id``) in v2 form (``configId``)."""
    out = []
    for option in msgspec.to_builtins(options):
        option["configId"] = option.pop("id")
        out.append(option)
    return out


def _opened(
    result: acp_types.NewSessionResult
    | acp_sessions.LoadSessionResult
    | acp_sessions.ResumeSessionResult
    | acp_sessions.ForkSessionResult,
) -> v2.SessionOpened:
    """A session's open result (new, load, resume, fork) in v2 form (no modes)."""
    opened = v2.SessionOpened()
    if isinstance(result, acp_types.NewSessionResult | acp_sessions.ForkSessionResult):
        opened.sessionId = result.sessionId
    if result.configOptions is not UNSET:
        opened.configOptions = config_options(result.configOptions)
    if result.meta is not UNSET:
        opened.meta = result.meta
    return opened


def _permission(params: Any) -> v2.RequestPermissionRequest:
    call = params.toolCall
    return v2.RequestPermissionRequest(
        sessionId=params.sessionId,
        title=call.title if isinstance(call.title, str) and call.title else "Permission",
        subject=v2.ToolCallSubject(toolCall=call),
        options=params.options,
        meta=params.meta,
    )


#: Updates whose v1 and v2 shapes are the same: sent as they are (the streamed chunks
#: among them: the hot path).
V2Face.same = frozenset(
    {
        acp_types.AgentMessageChunk,
        acp_types.AgentThoughtChunk,
        acp_types.UserMessageChunk,
        acp_types.UsageUpdate,
        acp_types.Notice,
        acp_tools.SessionInfoUpdate,
        acp_tools.CompactionUpdate,
        acp_subagents.SessionMessage,
        acp_quota.QuotaUpdate,
        # v2's own, which only a v2 client is sent (a command's terminal, an answer's upsert).
        v2.TerminalUpdate,
        v2.TerminalOutputChunk,
        v2.AgentMessage,
    }
)

#: How every other update is rendered for v2 (an update of no type here is not sent).
V2Face.render = {
    **{kind: V2Face._as_is for kind in V2Face.same},
    acp_tools.ToolCall: V2Face._tool_call,
    acp_tools.ToolCallUpdate: V2Face._tool_call,
    acp_permissions.ToolCallStatusUpdate: V2Face._tool_call,
    acp_tools.Plan: V2Face._plan,
    acp_tools.PlanUpdate: V2Face._proposed_plan,
    acp_commands.AvailableCommandsUpdate: V2Face._commands,
    acp_settings.ConfigOptionUpdate: V2Face._config,
    acp_settings.CurrentModeUpdate: V2Face._dropped,
    acp_subagents.SubagentUpdate: V2Face._subagent,
    air.AsyncTaskSpawned: V2Face._async_task,
    air.AsyncTaskStateUpdate: V2Face._async_task,
}

#: How each fact is rendered for v2 (a fact of no type here is a defect, raised).
V2Face.on_fact = {
    facts.PromptInserted: V2Face._inserted,
    facts.PromptEnded: V2Face._prompt_ended,
    facts.TurnStarted: V2Face._turn_started,
    facts.TurnEnded: V2Face._turn_ended,
    facts.SessionOpened: V2Face._session_opened,
    facts.ToolCallCancelled: V2Face._call_cancelled,
}
