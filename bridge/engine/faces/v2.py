"""ACP v2 (draft) over the same engine: what a v2 client sends, and sees, differently.

The engine speaks v1 inside. When ``initialize`` negotiates version 2, the hub
gets a :class:`V2Face`: every message for the client passes through it on its
way out (:meth:`V2Face.update`, :meth:`V2Face.result`, :meth:`V2Face.refused`,
:meth:`V2Face.asking`), and every client request through :meth:`V2Face.route`
on its way in. Nothing of the engine's state is copied: the thread records,
queues, approvals and sub-agents are the engine's; the face keeps only what v2
adds on top (which prompt became which user message, the last ``state_update``
sent per session). With a v1 client there is no face and nothing here runs.

What v2 changes, and how it is kept:

1. **A prompt is answered when it is inserted**, with the user message's id.
   An ordinary prompt is inserted when Codex's ``userMessage`` item for it
   appears (the engine sends its ``turn/start`` and calls :meth:`V2Face.inserted`;
   the item arrives through :meth:`V2Face.item_started`), and takes that item's
   id, the one history replays it under. A slash command (no such item) is
   inserted when Codex accepts its request, or at once when the bridge answers it
   itself, with an id of the bridge's. Should a turn's tool call or plan come
   before its user message item, the prompt is inserted first. The answer is
   followed by the ``user_message`` echo and ``state_update: running``. The
   engine's own answer (its stop reason) becomes ``state_update: idle`` with that
   reason; an error after insertion becomes ``idle`` with ``stopReason:
   "error"``. A prompt that waits behind a running one is not inserted yet: a
   cancel answers it -32800 (request cancelled), and a failure before insertion
   is its error.
2. **Work state on every session.** ``running`` from insertion, then
   ``requires_action`` while the client holds a permission request of the
   session, ``running`` again once it is answered, ``idle`` at the end. A
   sub-agent's state is the engine's own report (``subagent_update.state`` on
   the parent); v2 also sends it as the child's ``state_update``, after the
   parent's copy (so a child is never spoken of before it is announced).
3. **Resume replaces load.** ``session/resume`` with ``replayFrom: {type:
   "start"}`` is the engine's ``session/load`` (history, and sub-agents' with
   the RFD's freshness boundary); without it, the engine's ``session/resume``.
   Both send the session's current ``state_update`` just before the answer.
4. **Shapes.** ``tool_call`` becomes a ``tool_call_update`` upsert; a diff
   becomes structured changes plus a git patch; ``plan`` becomes
   ``plan_update``; commands, config options and auth methods take their v2
   form; modes do not exist in v2 (the mode is a config option already).
5. **Methods v2 adds** that Codex can do are done here: ``session/status``,
   ``session/set_title`` (``thread/name/set``), ``session/archive`` /
   ``unarchive`` / ``delete`` (``thread/archive`` / ``unarchive`` /
   ``delete``), ``auth/login`` / ``auth/logout``, and ``tool_call/cancel`` for a
   running command (its process, found among the thread's terminals, is
   terminated; the call ends ``cancelled`` and the turn goes on). Commands are
   tool calls with their output as content, not agent-owned terminals, so
   ``terminal/cancel`` is refused with the reason, as is every other method
   Codex cannot do (``providers/*``, ``auth/status``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec
from msgspec import UNSET, Raw

from ...acp import commands as acp_commands
from ...acp import permissions as acp_permissions
from ...acp import settings as acp_settings
from ...acp import subagents as acp_subagents
from ...acp import tools as acp_tools
from ...acp import types as acp_types
from ...acp import v2
from ...codex import threads as codex_threads
from ...codex import types as codex_types
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ...jsonrpc.peer import ErrorObject
from ..core import workstate
from ..core.effects import ToClient
from ..core.hub import Hub, OnError, decode_params, from_codex, unknown_method
from ..core.outbox import update_effect

log = logging.getLogger(__name__)

#: v1 methods v2 removed: a v2 client calling one gets -32601.
V1_ONLY = frozenset({"session/load", "session/set_mode", "authenticate"})

#: v2 methods Codex cannot do, and why (-32601 with the reason; none is advertised).
NOT_OFFERED = {
    "providers/list": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "providers/set": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "providers/disable": "Codex's model providers live in its config.toml, which the bridge "
    "never writes",
    "auth/status": "not advertised (the auth.status capability is not offered)",
}

#: Sent by v2 clients and handled here, each with the method of the engine's that does it.
RENAMED = {"auth/login": "authenticate"}

#: Requests for the client that wait on the user: the session ``requires_action`` meanwhile.
ASKS_USER = frozenset({"session/request_permission", "elicitation/create"})

#: The turn of a resumed thread Codex reported active: its id is not known here.
ANY_TURN = "*"

#: Codex's experimental methods for a thread's running commands (``exec_command`` sessions).
LIST_TERMINALS = "thread/backgroundTerminals/list"
TERMINATE = "thread/backgroundTerminals/terminate"

#: The Codex method each v2 thread-management request is.
THREAD_METHODS = {
    "session/archive": "thread/archive",
    "session/unarchive": "thread/unarchive",
    "session/delete": "thread/delete",
}


@dataclass(slots=True)
class _Prompt:
    """A v2 ``session/prompt`` the engine has, until its work ends."""

    session_id: str
    content: list[Raw]
    #: The user message it became, once inserted.
    message_id: str | None = None


@dataclass(slots=True)
class _Session:
    """What v2 adds to one session: its last reported state, what it asks the client."""

    state: str = "idle"
    #: Permission requests (client request ids) of this session the client holds.
    asking: set[RequestId] = field(default_factory=set)
    #: Inserted prompts whose work has not ended.
    working: int = 0
    #: A turn Codex started with no prompt of this client's (see ``turn_started``).
    turn: str | None = None


class V2Face:
    """The v2 rendering of one client connection (see the module docstring)."""

    #: Sent as they are: the hub does not call :meth:`update` for them.
    unchanged: frozenset[type] = frozenset()

    def __init__(self, hub: Hub, *, fork: bool) -> None:
        self.hub = hub
        self.fork = fork
        self._prompts: dict[RequestId, _Prompt] = {}
        #: Client requests whose v1 result needs its v2 shape: id → the v2 method.
        self._asked: dict[RequestId, str] = {}
        #: ``session/resume`` requests: id → the session (its state goes out before the answer).
        self._resuming: dict[RequestId, str] = {}
        self._sessions: dict[str, _Session] = {}
        self._messages = 0
        #: session → the prompt whose turn/start went to Codex, until its user message
        #: item names it (see :meth:`inserted`).
        self._starting: dict[str, RequestId] = {}
        #: session → its tool calls that advertise ``cancel`` now (running commands).
        self._cancellable: dict[str, set[str]] = {}
        #: (session, tool call) the client cancelled: a failure then is ``cancelled``.
        self._cancelled_calls: set[tuple[str, str]] = set()
        #: False once Codex said it has no ``thread/backgroundTerminals/list``.
        self._terminals_supported = True

    # -- initialize -------------------------------------------------------------------------

    def initialize_result(
        self, info: acp_types.Implementation, auth_methods: list[acp_types.AuthMethod]
    ) -> v2.InitializeResult:
        session = v2.SessionCapabilities(
            prompt=v2.PromptCapabilities(image={}, embeddedContext={}),
            mcp={"http": {}},
            archive={},
            delete={},
            status={},
            title={},
        )
        if self.fork:
            session.fork = {}
        return v2.InitializeResult(
            protocolVersion=2,
            info=v2.Implementation(name=info.name, title=info.title, version=info.version),
            capabilities=v2.AgentCapabilities(session=session),
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

    # -- client requests on their way in ------------------------------------------------------

    def route(self, rid: RequestId, method: str, raw: Raw) -> tuple[str, Raw] | None:
        """The engine method and params that do v2 request ``method``, or ``None`` when it
        was handled here (answered now, or once Codex answers)."""
        if method in V1_ONLY:
            raise RpcError(
                ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method} (not in ACP v2)"
            )
        if method in NOT_OFFERED:
            raise RpcError(
                ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}: {NOT_OFFERED[method]}"
            )
        if method == "session/prompt":
            params = decode_params(raw, v2.PromptParams, method)
            self._prompts[rid] = _Prompt(params.sessionId, params.prompt)
            return method, raw
        if method == "session/resume":
            return self._resume(rid, raw)
        if method in ("session/new", "session/fork"):
            self._asked[rid] = method
            return method, _with_mcp_servers(raw, method)
        if method == "session/set_config_option":
            self._asked[rid] = method
            return method, raw
        if method in RENAMED:
            return RENAMED[method], raw
        handler = self._handlers.get(method)
        if handler is None:
            return method, raw  # the engine's (v1 and v2 alike), or its -32601
        handler(self, rid, raw)
        return None

    def _resume(self, rid: RequestId, raw: Raw) -> tuple[str, Raw]:
        params = decode_params(raw, v2.ResumeSessionParams, "session/resume")
        replay = params.replayFrom
        if replay is not None and replay.type != "start":
            raise RpcError.invalid_params(
                f"session/resume: replayFrom {replay.type!r} is not supported "
                '(only {"type": "start"}, or none)',
                {"replayFrom": replay.type},
            )
        self._resuming[rid] = params.sessionId
        self._asked[rid] = "session/resume"
        v1_params = msgspec.json.encode(
            {"sessionId": params.sessionId, "cwd": params.cwd, "mcpServers": params.mcpServers}
        )
        return ("session/load" if replay is not None else "session/resume"), Raw(v1_params)

    def _status(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SessionParams, "session/status")
        hub = self.hub
        record = hub.threads.session(params.sessionId)
        if record is not None:
            state = acp_subagents.WorkState(state=self._session(record.id).state)
            hub.answer_client(rid, v2.SessionStatusResult(status="open", state=state))
            return

        def read(result: codex_threads.ThreadReadResult) -> None:
            # Codex holds a thread another connection opened (a daemon's shared Codex): it
            # is in memory, for any connection, though not open on this one.
            loaded = (result.thread.status or {}).get("type", "notLoaded") != "notLoaded"
            hub.answer_client(rid, v2.SessionStatusResult(status="open" if loaded else "saved"))

        def unknown(error: ErrorObject) -> None:
            hub.refuse_client(
                rid,
                RpcError.not_found(
                    f"session/status: no session {params.sessionId} ({error.message})",
                    {"sessionId": params.sessionId},
                ),
            )

        hub.codex_request(
            "thread/read",
            codex_threads.ThreadReadParams(threadId=params.sessionId),
            codex_threads.ThreadReadResult,
            read,
            unknown,
        )

    def _set_title(self, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SetTitleParams, "session/set_title")
        hub = self.hub
        hub.codex_request(
            "thread/name/set",
            {"threadId": params.sessionId, "name": params.title},
            None,
            lambda _result: hub.answer_client(rid, v2.SetTitleResult(title=params.title)),
            hub.pass_error_to(rid),
        )

    def _logout(self, rid: RequestId, _raw: Raw) -> None:
        hub = self.hub
        hub.codex_request(
            "account/logout",
            None,
            None,
            lambda _result: hub.answer_client(rid, v2.Empty()),
            hub.pass_error_to(rid),
        )

    def _cancel_tool_call(self, rid: RequestId, raw: Raw) -> None:
        """Stop one running command: Codex lists it among the thread's terminals (its
        ``itemId`` is the tool call's id) and terminates its process. The answer says the
        cancel was accepted; the call's final status (``cancelled``, or ``completed`` /
        ``failed`` if it finished first) confirms it."""
        params = decode_params(raw, v2.ToolCallCancelParams, "tool_call/cancel")
        session_id, call_id = params.sessionId, params.toolCallId
        if call_id not in self._cancellable.get(session_id, ()):
            raise RpcError.invalid_params(
                f"tool_call/cancel: tool call {call_id} does not advertise cancel (unknown, "
                "already final, or no command: Codex stops a command, or a whole turn with "
                "session/cancel)",
                {"toolCallId": call_id},
            )
        hub = self.hub
        self._cancelled_calls.add((session_id, call_id))

        def listed(result: Any) -> None:
            found = [t for t in _terminals(result) if t.get("itemId") == call_id]
            if not found:
                hub.answer_client(rid, v2.Empty())  # finished first: its status says how
                return
            hub.codex_request(
                TERMINATE,
                {"threadId": session_id, "processId": found[0].get("processId")},
                None,
                lambda _result: hub.answer_client(rid, v2.Empty()),
                hub.pass_error_to(rid),
            )

        def refused(error: ErrorObject) -> None:
            if not unknown_method(error):
                hub.refuse_client(rid, from_codex(error))
                return
            # An older or newer Codex without the experimental method: commands are no
            # longer offered as cancellable; session/cancel still stops them with the turn.
            if self._terminals_supported:
                log.warning(
                    "Codex has no %s (%s): tool_call/cancel is no longer offered",
                    LIST_TERMINALS,
                    error.message,
                )
            self._terminals_supported = False
            hub.refuse_client(
                rid,
                RpcError.invalid_params(
                    f"tool_call/cancel: this Codex cannot stop one command ({LIST_TERMINALS} "
                    "is unknown to it); session/cancel stops the turn and its commands",
                    {"toolCallId": call_id},
                ),
            )

        hub.codex_request(LIST_TERMINALS, {"threadId": session_id}, None, listed, refused)

    def _cancel_terminal(self, _rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.TerminalCancelParams, "terminal/cancel")
        raise RpcError.invalid_params(
            f"terminal/cancel: terminal {params.terminalId} does not advertise cancel "
            "(use session/cancel)",
            {"terminalId": params.terminalId},
        )

    _handlers: ClassVar[dict[str, Callable[[V2Face, RequestId, Raw], None]]] = {}

    # -- the engine's prompt life cycle ---------------------------------------------------------

    def inserted(self, rid: RequestId, named_by_item: bool) -> None:
        """The engine began prompt ``rid``'s work (see rule 1). ``named_by_item``: its
        turn/start is on its way to Codex, whose user message item gives the message its
        id (the one history replays); else it is inserted now."""
        prompt = self._prompts.get(rid)
        if prompt is None or prompt.message_id is not None:
            return
        if named_by_item:
            self._starting[prompt.session_id] = rid
            return
        self._insert(rid, prompt, None)

    def item_started(self, thread_id: str, item: Any) -> None:
        """Codex's user message item of a prompt whose turn/start it was sent: inserted."""
        if type(item) is not codex_types.UserMessageItem or thread_id not in self._starting:
            return
        rid = self._starting[thread_id]
        prompt = self._prompts.get(rid)
        if prompt is not None:
            self._insert(rid, prompt, item.id)

    def _insert(self, rid: RequestId, prompt: _Prompt, message_id: str | None) -> None:
        if self._starting.get(prompt.session_id) == rid:
            del self._starting[prompt.session_id]
        if message_id is None:
            # No Codex item names it (a slash command, or none came): an id of this bridge's.
            self._messages += 1
            message_id = f"{prompt.session_id}-prompt-{self._messages}"
        prompt.message_id = message_id
        hub = self.hub
        hub.emit(ToClient(hub.client.response(rid, v2.PromptResult(messageId=message_id))))
        self._emit(prompt.session_id, v2.UserMessage(messageId=message_id, content=prompt.content))
        session = self._session(prompt.session_id)
        session.working += 1
        session.turn = None  # a turn Codex reported first is this prompt's
        self._set_state(
            prompt.session_id, session, "requires_action" if session.asking else "running"
        )

    def _insert_waiting(self, session_id: str) -> None:
        """Something of the session's turn goes out before its user message item: the
        prompt is inserted first (the client learns of its work in order)."""
        rid = self._starting.get(session_id)
        prompt = self._prompts.get(rid) if rid is not None else None
        if rid is not None and prompt is not None:
            self._insert(rid, prompt, None)

    def turn_started(self, thread_id: str, turn_id: str) -> None:
        """Codex started a turn: one no prompt of this client's started (a goal's, or
        another client's on a shared thread) is work too, and ``running``."""
        record = self.hub.threads.session(thread_id)
        if record is None or record.is_child:
            return  # a child's state is the engine's report (see update)
        session = self._session(thread_id)
        if session.working or session.turn is not None:
            return
        session.turn = turn_id
        self._set_state(thread_id, session, "running")

    def turn_completed(self, thread_id: str, turn_id: str, status: str, error: str | None) -> None:
        """The end of such a turn: ``idle`` with its stop reason."""
        session = self._sessions.get(thread_id)
        if session is None or session.turn not in (turn_id, ANY_TURN):
            return
        session.turn = None
        if session.working:
            return
        session.state = "idle"
        state = workstate.turn_outcome(status, error)
        self._emit(
            thread_id,
            v2.StateUpdate(
                state="idle",
                stopReason=state.stopReason if state.stopReason is not None else "error",
                error=v2.Error(code=ErrorCode.INTERNAL_ERROR, message=error or f"turn {status}")
                if state.stopReason is None
                else UNSET,
            ),
        )

    # -- what goes out -------------------------------------------------------------------------

    def result(self, rid: RequestId, result: Any) -> Any:
        """The v2 form of the engine's answer to ``rid``, or ``None`` when it is not sent
        (a prompt's end: its work state says it)."""
        prompt = self._prompts.get(rid)
        if (
            prompt is not None
            and prompt.message_id is None
            and self._starting.get(prompt.session_id) == rid
        ):
            self._insert(rid, prompt, None)  # its turn ran, though no item named it
        prompt = self._prompts.pop(rid, None)
        if prompt is not None:
            if prompt.message_id is None:
                # Answered before insertion: a queued prompt cancelled, never inserted.
                stop = getattr(result, "stopReason", None)
                self.hub.emit(
                    ToClient(
                        self.hub.client.error(
                            rid,
                            ErrorCode.REQUEST_CANCELLED,
                            "Request cancelled: the prompt was cancelled before it was inserted"
                            if stop == "cancelled"
                            else f"the prompt ended ({stop}) before it was inserted",
                        )
                    )
                )
                return None
            self._ended(prompt, v2.StateUpdate(state="idle", stopReason=result.stopReason))
            return None
        method = self._asked.pop(rid, None)
        if method is None:
            return result
        session_id = self._resuming.pop(rid, None)
        if session_id is not None:
            # Current state after any replay, before the answer (v2's resume rule).
            self._resumed(session_id)
        return _opened(result)

    def _resumed(self, session_id: str) -> None:
        """The resumed session's state now. A turn Codex still runs (left by a client of a
        shared Codex) is work: ``running``, or ``requires_action`` while it waits on the
        user; its end is reported as a Codex-started turn's is."""
        record = self.hub.threads.session(session_id)
        session = self._session(session_id)
        # The same rules as a sub-agent's state (Codex's status, the turn, what waits).
        state = workstate.snapshot(record).state if record is not None else "idle"
        if record is not None and (record.turn is None or record.turn.foreign) and state != "idle":
            session.turn = ANY_TURN  # Codex's turn, not one this bridge started
        session.state = state
        self._emit(session_id, v2.StateUpdate(state=state), force=True)

    def refused(self, rid: RequestId, error: RpcError) -> bool:
        """Whether the engine's error for ``rid`` is sent as it is (``False``: a prompt
        already inserted, whose work ended in that error: its state says it)."""
        self._asked.pop(rid, None)
        self._resuming.pop(rid, None)
        prompt = self._prompts.pop(rid, None)
        if prompt is not None and self._starting.get(prompt.session_id) == rid:
            del self._starting[prompt.session_id]  # refused before Codex named it: not inserted
        if prompt is None or prompt.message_id is None:
            return True
        self._ended(
            prompt,
            v2.StateUpdate(
                state="idle",
                stopReason="error",
                error=v2.Error(
                    code=error.code,
                    message=error.message,
                    data=error.data if error.data is not None else UNSET,
                ),
            ),
        )
        return False

    def _ended(self, prompt: _Prompt, state: v2.StateUpdate) -> None:
        session = self._session(prompt.session_id)
        session.working = max(0, session.working - 1)
        if session.working:
            return  # another inserted prompt's work goes on
        session.state = "idle"
        self._emit(prompt.session_id, state)

    def asking(
        self,
        method: str,
        params: Any,
        on_result: Callable[[Raw], None],
        on_error: OnError,
    ) -> tuple[Any, Callable[[Raw], None], OnError, Callable[[RequestId], None]]:
        """A request for the client, in v2 form; while the client holds a permission
        request, its session ``requires_action``. Returns the params, the callbacks to
        wait with, and what to call with the request's id once it is sent."""
        session_id = getattr(params, "sessionId", None)
        if method not in ASKS_USER or not isinstance(session_id, str):
            return params, on_result, on_error, _nothing
        if isinstance(params, acp_permissions.RequestPermissionRequest):
            params = _permission(params)
        record = self.hub.threads.session(session_id)
        root = record is not None and record.parent_id is None
        rid_box: list[RequestId] = []

        def settle() -> None:
            session = self._session(session_id)
            if rid_box:
                session.asking.discard(rid_box[0])
            if root and not session.asking and session.state == "requires_action":
                self._set_state(session_id, session, "running")

        def answered(raw: Raw) -> None:
            settle()
            on_result(raw)

        def refused(error: ErrorObject) -> None:
            settle()
            on_error(error)

        def sent(rid: RequestId) -> None:
            rid_box.append(rid)
            session = self._session(session_id)
            session.asking.add(rid)
            if root and session.state == "running":
                self._set_state(session_id, session, "requires_action")

        return params, answered, refused, sent

    def update(self, session_id: str, update: Any) -> None:
        """Send the v2 form of one engine update (some become two, some none). The hub
        sends the ``unchanged`` ones itself, without calling this."""
        kind = type(update)
        if self._starting and session_id in self._starting and kind in _TURN_TRAFFIC:
            self._insert_waiting(session_id)
        if kind is acp_tools.ToolCall or kind is acp_tools.ToolCallUpdate:
            self.hub.emit(update_effect(session_id, self._tool_update(session_id, update)))
            return
        render = _RENDER.get(kind)
        if render is not None:
            rendered = render(update)
            if rendered is not None:
                self.hub.emit(update_effect(session_id, rendered))
            return
        if kind is acp_subagents.SubagentUpdate:
            self.hub.emit(update_effect(session_id, update))
            state = update.state
            if isinstance(state, acp_subagents.WorkState):
                # The child's own stream carries its state too, after the parent's copy.
                child = self._session(update.sessionId)
                child.state = state.state
                self._emit(update.sessionId, _state_update(state))
            return
        self.hub.emit(update_effect(session_id, update))

    def _tool_update(self, session_id: str, update: Any) -> msgspec.Struct:
        """A tool call's v2 upsert. A command running on a session the client may act on
        advertises ``cancel`` until its final status."""
        call_id = update.toolCallId
        status = update.status
        cancellable = self._cancellable.get(session_id)
        capabilities: Any = UNSET
        if (
            type(update) is acp_tools.ToolCall
            and _is_command(update)
            and status in ("pending", "in_progress")
            and self._terminals_supported
            and not self._is_child(session_id)
        ):
            self._cancellable.setdefault(session_id, set()).add(call_id)
            capabilities = v2.ToolCallCapabilities(cancel={})
        elif status in ("completed", "failed") and cancellable and call_id in cancellable:
            cancellable.discard(call_id)
            capabilities = None
            if status == "failed" and (session_id, call_id) in self._cancelled_calls:
                status = "cancelled"
        if status in ("completed", "failed", "cancelled"):
            self._cancelled_calls.discard((session_id, call_id))
        if type(update) is acp_tools.ToolCallUpdate and capabilities is UNSET:
            return _tool_call_update(update)
        return v2.ToolCallUpdate(
            toolCallId=call_id,
            title=update.title,
            kind=update.kind,
            status=status,
            content=_content(update.content),
            locations=update.locations,
            rawInput=update.rawInput,
            rawOutput=update.rawOutput,
            capabilities=capabilities,
            meta=update.meta,
        )

    def _is_child(self, session_id: str) -> bool:
        record = self.hub.threads.session(session_id)
        return record is not None and record.is_child

    # -- helpers --------------------------------------------------------------------------------

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session()
        return session

    def _set_state(self, session_id: str, session: _Session, state: str) -> None:
        if session.state == state:
            return
        session.state = state
        self._emit(session_id, v2.StateUpdate(state=state))

    def _emit(self, session_id: str, update: msgspec.Struct, *, force: bool = False) -> None:
        if force or session_id in self.hub.threads.shown_ids:
            self.hub.emit(update_effect(session_id, update))


def _thread_request(method: str) -> Callable[[V2Face, RequestId, Raw], None]:
    """Handle v2 ``method`` as the Codex thread request of the same name (answered ``{}``)."""
    codex_method = THREAD_METHODS[method]

    def handle(face: V2Face, rid: RequestId, raw: Raw) -> None:
        params = decode_params(raw, v2.SessionParams, method)
        hub = face.hub
        hub.codex_request(
            codex_method,
            {"threadId": params.sessionId},
            None,
            lambda _result: hub.answer_client(rid, v2.Empty()),
            hub.pass_error_to(rid),
        )

    return handle


V2Face._handlers = {
    "session/status": V2Face._status,
    "session/set_title": V2Face._set_title,
    **{method: _thread_request(method) for method in THREAD_METHODS},
    "auth/logout": V2Face._logout,
    "tool_call/cancel": V2Face._cancel_tool_call,
    "terminal/cancel": V2Face._cancel_terminal,
}


def _nothing(_rid: RequestId) -> None:
    pass


class _McpServers(msgspec.Struct):
    mcpServers: Any = UNSET


_MCP_PEEK = msgspec.json.Decoder(_McpServers)


def _with_mcp_servers(raw: Raw, method: str) -> Raw:
    """v2 params, where ``mcpServers`` may be left out, as the engine's v1 handler reads them."""
    try:
        if _MCP_PEEK.decode(raw or b"null").mcpServers is not UNSET:
            return raw
        params = msgspec.json.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return raw  # the handler says what is wrong
    if not isinstance(params, dict):
        return raw
    params["mcpServers"] = []
    return Raw(msgspec.json.encode(params))


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
    return v2.Diff(
        changes=[v2.DiffChange(operation="add" if old is None else "modify", path=diff.path)],
        patch=_git_patch(diff.path, old, diff.newText, diff.meta),
        meta=diff.meta,
    )


def _git_patch(path: str, old: str | None, new: str, meta: Any) -> v2.DiffPatch | None:
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
    else:
        header.append(f"--- {path}\n")
    header.append(f"+++ {path}\n")
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


def _terminals(result: Any) -> list[dict[str, Any]]:
    """The entries of ``thread/backgroundTerminals/list``'s answer (raw: it is experimental)."""
    decoded = msgspec.json.decode(result) if isinstance(result, bytes | Raw) else result
    data = decoded.get("data") if isinstance(decoded, dict) else None
    return [t for t in data if isinstance(t, dict)] if isinstance(data, list) else []


def _tool_call_update(update: acp_tools.ToolCallUpdate) -> acp_tools.ToolCallUpdate:
    if update.content is UNSET or not any(isinstance(c, acp_tools.Diff) for c in update.content):
        return update
    return msgspec.structs.replace(update, content=_content(update.content))


def _plan(update: acp_tools.Plan) -> v2.PlanUpdate:
    # One plan per session (Codex's turn plan): every update replaces it.
    return v2.PlanUpdate(
        plan=v2.PlanItems(planId="plan", entries=list(update.entries)), meta=update.meta
    )


def _commands(update: acp_commands.AvailableCommandsUpdate) -> v2.AvailableCommandsUpdate:
    return v2.AvailableCommandsUpdate(availableCommands=commands(update.availableCommands))


def commands(available: list[acp_commands.AvailableCommand]) -> list[v2.Command]:
    return [
        v2.Command(
            name=c.name,
            description=c.description,
            input=v2.TextCommandInput(hint=c.input.hint)
            if isinstance(c.input, acp_commands.UnstructuredCommandInput)
            else UNSET,
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


def _config(update: acp_settings.ConfigOptionUpdate) -> v2.ConfigOptionUpdate:
    return v2.ConfigOptionUpdate(configOptions=config_options(update.configOptions))


def _opened(result: Any) -> Any:
    """A session's v1 result (new, load, resume, fork, set config option) in v2 form."""
    fields = msgspec.to_builtins(result)
    if not isinstance(fields, dict):
        return result
    opened = v2.SessionOpened()
    if "sessionId" in fields:
        opened.sessionId = fields["sessionId"]
    if "configOptions" in fields:
        opened.configOptions = config_options(result.configOptions)
    if "_meta" in fields:
        opened.meta = fields["_meta"]
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


#: Updates whose v1 and v2 shapes are the same: sent as they are.
_SAME: frozenset[type] = frozenset(
    {
        acp_types.AgentMessageChunk,
        acp_types.AgentThoughtChunk,
        acp_types.UserMessageChunk,
        acp_types.UsageUpdate,
        acp_types.Notice,
        acp_tools.SessionInfoUpdate,
        acp_tools.CompactionUpdate,
        acp_subagents.SessionMessage,
    }
)

V2Face.unchanged = _SAME

#: Updates only a turn sends (a session's commands, usage or title may come any time).
_TURN_TRAFFIC: frozenset[type] = frozenset(
    {acp_tools.ToolCall, acp_tools.ToolCallUpdate, acp_tools.Plan}
)

#: Updates v2 shapes differently; ``None`` from one means v2 has no such update.
_RENDER: dict[type, Callable[[Any], msgspec.Struct | None]] = {
    acp_tools.Plan: _plan,
    acp_commands.AvailableCommandsUpdate: _commands,
    acp_settings.ConfigOptionUpdate: _config,
    acp_settings.CurrentModeUpdate: lambda _update: None,  # v2 has no modes
}
