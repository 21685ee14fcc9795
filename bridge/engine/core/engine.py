"""The bridge's state machine: ACP and Codex messages in, messages out.

Rules this engine keeps (read these before changing it):

1. It does no I/O and keeps no clock. Every input is a complete JSON-RPC
   message (bytes) from one side, or an event the shell observed (Codex is
   gone, the client is gone, the time it read); every output is an
   :class:`~bridge.engine.core.effects.Effect` naming the side to send bytes to,
   or asking the shell to read the clock (Codex's ``currentTime/read``).
   The live daemon and the replay tests run this same code, so what a
   recording shows is what a user saw.
2. Nothing from the client reaches Codex before Codex has finished its
   ``initialize`` handshake: client messages that arrive earlier wait, in
   order, and are handled once Codex is ready (or answered with an error if
   Codex never becomes ready). The one exception is the client's
   ``initialize``, whose answer needs nothing from Codex: it is answered at
   once while Codex starts or is brought back, unless an earlier client
   message still waits (then it waits behind it, as before).
3. Every client request is answered exactly once. A request that waits on
   Codex is answered when Codex answers, or with an error when Codex is lost
   or answers with something that does not fit. Every Codex request is
   answered exactly once too, never left waiting (except one for another
   client's thread, which is that client's to answer).
4. A prompt resolves when Codex says the turn ended (``turn/completed``), never
   when a request was merely acknowledged: ``session/cancel`` sends
   ``turn/interrupt``, and the prompt becomes ``cancelled`` only once Codex
   reports the turn ``interrupted``. A cancel stops the work, not only the
   turn: the sub-agents under the session and the commands the cancelled
   threads left running stop too (:mod:`bridge.engine.features.terminals`). No update
   of a turn follows its answer: its tool calls still open end first, and a
   cancelled turn ends after the sub-agent turns its cancel stopped.
5. Bad input is answered with a typed JSON-RPC error (-32700, -32600, -32601,
   -32602, or not-found) and changes nothing else; the connection goes on. No
   input, from either side, makes :meth:`Engine.receive_client` or
   :meth:`Engine.receive_codex` raise: a defect in a handler is logged with its
   traceback and the request that met it answered with -32603.

Structure. This module is the wiring: the only one that builds the features
(``prompts``, ``streaming``, ``retries``, ``lifecycle``, ``tools``, ``approvals``,
``settings``, ``auth``, ``subagents``, ``subagent_history``, ``recovery``,
``terminals``, ``steering``, ``palette``, ``session_admin``) and the only one that knows the order in which
several of them react to one message. The client is spoken to through the
hub's face (:mod:`bridge.engine.faces`), v1's until ``initialize`` picks v2;
each face's request table decodes its version's params once, for the feature
method both versions reach. Each Codex message is decoded once
(:mod:`bridge.codex.messages`), then handed, typed, to one routing entry of
:meth:`Engine._routes`; a client request goes to one handler. The features
share the :class:`~bridge.engine.core.hub.Hub` (the peers, the thread registry, the
output) and know nothing of each other: what one needs of another is passed
to it here, as a function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeAlias

import msgspec
from msgspec import Raw

from ... import __version__
from ...acp import air, negotiation
from ...acp import steering as acp_steering
from ...acp import types as acp_types
from ...codex import messages as codex_messages
from ...codex import types as codex_types
from ...codex import versions as codex_versions
from ...jsonrpc import (
    ErrorCode,
    IncomingError,
    IncomingNotification,
    IncomingRequest,
    IncomingResponse,
    RequestId,
    RpcError,
)
from ...jsonrpc.peer import MAX_DEPTH, ErrorObject
from ..faces.v1 import V1Face
from ..features import commands
from ..features.approvals import Approvals
from ..features.async_tasks import AsyncTasks
from ..features.auth import Authentication
from ..features.file_reports import FileReports
from ..features.lifecycle import Lifecycle
from ..features.palette import Palette
from ..features.prompts import TURN_TRAFFIC, Prompts
from ..features.providers import Providers
from ..features.recovery import Recovery
from ..features.retries import Retries
from ..features.session_admin import SessionAdmin
from ..features.session_index import SessionIndex
from ..features.settings import SettingsSelectors
from ..features.steering import Steering
from ..features.streaming import Streaming
from ..features.subagent_history import SubagentHistory
from ..features.subagents import Subagents
from ..features.terminals import Terminals
from ..features.tools import Tools
from ..features.usage_limits import UsageLimits
from . import facts
from .effects import Effect
from .hub import AGENT_NAME, Hub, RequestHandler, decode_params
from .threads import Held, ThreadRecord, Threads

log = logging.getLogger(__name__)

#: Client messages kept while Codex is brought back; past this many, they are
#: answered at once with the reason Codex is away.
MAX_WAITING = 1000
CodexRequestHandler: TypeAlias = Callable[[RequestId, Any], None]

#: A message this short cannot nest deeper than the peer accepts (JSON nests at most
#: half its length deep), so reading it without the peer skips no check.
_SHALLOW = 2 * MAX_DEPTH
_DELTA = "item/agentMessage/delta"
#: Answered with the time whatever thread it names, never held for one.
_CLOCK = "currentTime/read"
_DELTA_HEAD = codex_messages.AGENT_MESSAGE_DELTA_HEAD
_DELTA_HEAD_LEN = len(_DELTA_HEAD)

__all__ = ["AGENT_NAME", "Engine"]


class Engine:
    """Translate between one ACP client and one Codex app-server connection.

    Call :meth:`start` once, then feed every message with
    :meth:`receive_client` / :meth:`receive_codex`, and report a lost Codex
    with :meth:`codex_lost` and a client that left with :meth:`client_lost`.
    Each call returns the effects to carry out, in order.

    ``thread_config``: the ``-c key=value`` overrides sent with every
    ``thread/start``. ``api_key``: an OpenAI API key from the bridge's
    environment, for ``authenticate``. ``is_directory``: whether a path is an
    existing directory (the shell asks the file system; a replay answers as
    the recording says). The engine reads no environment and no file itself.
    """

    def __init__(
        self,
        *,
        thread_config: dict[str, Any] | None = None,
        api_key: str | None = None,
        is_directory: Callable[[str], bool] | None = None,
        detachable: bool = False,
        paged_store: bool = False,
    ) -> None:
        hub = self.hub = Hub(
            thread_config=thread_config,
            api_key=api_key,
            is_directory=is_directory or _any_absolute_path,
            paged_store=paged_store,
        )
        #: Codex is shared (a daemon's, or one attached by URL) and outlives this
        #: client: when the client leaves, what waits on the user is left waiting,
        #: for the next client that resumes the thread.
        self.detachable = detachable
        self._before_ready: list[bytes] = []
        #: Requests that arrived with the message being handled: ("client" | "codex", id).
        self._arrived: list[tuple[str, RequestId]] = []
        #: The client sent a request other than ``initialize``: v2 allows no more of those.
        self._past_initialize = False
        #: What Codex said it is at the handshake (its version is in it).
        self.codex_user_agent = ""

        self.approvals = Approvals(hub)
        self.tools = Tools(hub)
        self.settings = SettingsSelectors(hub)
        self.auth = Authentication(hub)
        self.subagents = Subagents(
            hub,
            refeed=self._refeed,
            cancel_questions=self.approvals.cancel_thread,
            interrupt_refused=self._release_turn_ends,
        )
        self.subagent_history = SubagentHistory(
            hub,
            history_item=self.subagents.history_item,
            session_added=self.subagents.session_added,
            report=self.subagents.report,
        )
        self.prompts = Prompts(
            hub,
            open_root=self._open_root,
            opened=self._session_opened,
            thread_starting=self._thread_starting,
            turn_starting=self.settings.turn_starting,
            command=commands.command_request,
            settled=self._prompt_settled,
            turn_known=lambda record: self.steering.turn_known(record),
            quick=lambda record, command, done, failed: self.palette.run(
                record, command, done, failed
            ),
        )
        hub.before_updates(TURN_TRAFFIC, self.prompts.turn_traffic)
        self.streaming = Streaming(hub)
        self.retries = Retries(hub, prompts=self.prompts)
        self.palette = Palette(hub, describe=self.settings.describe)
        self.steering = Steering(
            hub,
            start_turn=self.prompts.start_turn,
            input_modalities=self.settings.input_modalities,
        )
        self.session_index = SessionIndex(hub)
        self.usage_limits = UsageLimits(hub)
        self.providers = Providers(hub)
        self.async_tasks = AsyncTasks(hub)
        self.file_reports = FileReports(hub, self.prompts.session_prompt)
        limits, reports = self.usage_limits, self.file_reports
        hub.prompt_ending = lambda fact: reports.prompt_ending(limits.prompt_ending(fact))
        self.lifecycle = Lifecycle(
            hub,
            rows_listed=self.session_index.rows,
            open_root=self._open_root,
            opened=self._session_opened,
            replay=self.subagent_history.replay,
            cancel_prompt=self.prompts.cancel,
            cancel_work=self._cancel_work,
            forget=self.forget,
            open_failed=self.subagents.open_failed,
        )
        # A session's first answer lists every model: opening one waits for the catalog
        # asked at the handshake (see bridge.engine.features.settings).
        after_catalog = self._after_catalog
        self._client_requests: dict[str, RequestHandler] = {
            "initialize": self._initialize,
            "authenticate": self.auth.authenticate,
            "session/new": after_catalog(self.prompts.session_new),
            "session/prompt": self.file_reports.session_prompt,
            "session/load": after_catalog(self.lifecycle.session_load),
            "session/resume": after_catalog(self.lifecycle.session_resume),
            "session/fork": after_catalog(self.lifecycle.session_fork),
            "session/list": self.lifecycle.session_list,
            "session/close": self.lifecycle.session_close,
            "session/set_mode": self.settings.set_mode,
            "session/set_config_option": self.settings.set_config_option,
            acp_steering.METHOD: self.steering.steer,
        }
        #: A v1 client is spoken to until ``initialize`` says otherwise.
        self._v1 = V1Face(hub, self._client_requests)
        hub.speak(self._v1)
        self.admin = SessionAdmin(hub)
        self._codex_requests: dict[str, CodexRequestHandler] = {
            "item/commandExecution/requestApproval": self.approvals.command_approval,
            "item/fileChange/requestApproval": self.approvals.file_change_approval,
            "item/permissions/requestApproval": self.approvals.permissions_approval,
            "item/tool/requestUserInput": self.approvals.user_input,
            "mcpServer/elicitation/request": self.approvals.mcp_elicitation,
            # Codex sends these only for turns started with its removed v1 API
            # (sendUserTurn); this bridge starts turns with turn/start only.
            "execCommandApproval": self.approvals.legacy_approval,
            "applyPatchApproval": self.approvals.legacy_approval,
            # Codex 0.169 (experimental); any thread's, as the time is nobody's.
            "currentTime/read": lambda rid, _params: self.hub.read_clock(rid),
        }
        self.recovery = Recovery(
            hub, report=self.subagents.report, resumed=self.prompts.resume_settled
        )
        self.terminals = Terminals(hub)
        #: What every connection hears of any thread, seen before the session gate.
        index = self.session_index
        self._observers: dict[str, Callable[[Any], None]] = {
            "thread/status/changed": index.status_changed,
            "turn/completed": index.turn_completed,
            "thread/started": index.thread_started,
            "thread/name/updated": lambda note: index.thread_renamed(note.threadId),
        }
        self._session_ids = hub.threads.session_ids  # read for every Codex message
        self._notifications = self._routes()
        self._on_agent_message_delta = self._notifications[_DELTA]
        #: Codex was lost and the shell is bringing it back: client messages wait.
        self._recovering = False
        #: The handshake under way is on a restarted Codex (recover once it is done).
        self._restarted = False
        #: ``turn/completed`` of cancelled turns whose cancelled sub-agents still work,
        #: by thread: handled once their turns have ended (see ``_routes``).
        self._held_turn_ends: dict[str, codex_types.TurnNotification] = {}

    def _routes(self) -> dict[str, Callable[[Any], None]]:
        """Each Codex notification → what reacts to it, in this order."""
        prompts, streaming, tools, approvals, subagents = (
            self.prompts,
            self.streaming,
            self.tools,
            self.approvals,
            self.subagents,
        )

        def item_started(note: codex_messages.ItemNotification) -> None:
            prompts.item_started(note)
            streaming.item_started(note)
            tools.item_started(note)
            approvals.item_started(note)
            subagents.item_started(note)

        def item_completed(note: codex_messages.ItemNotification) -> None:
            self.steering.item_completed(note)
            streaming.item_completed(note)
            tools.item_completed(note)
            self.async_tasks.item_completed(note)
            approvals.item_completed(note)
            subagents.item_completed(note)

        def turn_started(note: codex_types.TurnNotification) -> None:
            prompts.turn_started(note)
            self.file_reports.turn_started(note)
            subagents.turn_started(note)
            self.hub.state(facts.TurnStarted(note.threadId, note.turn.id))

        def turn_completed(note: codex_types.TurnNotification) -> None:
            # A cancelled turn ends after the sub-agent turns its cancel stopped: their
            # last updates and idle states belong to it, before its answer (Codex may
            # end the parent's turn first; each interrupted turn surely ends).
            if self._cancelled_work_running(note):
                self._held_turn_ends[note.threadId] = note
                return
            # The turn's tool calls still open end first (no update may follow the
            # prompt's answer), then the prompt settles (a close waiting on it finishes),
            # then what the turn still asked is withdrawn, then a sub-agent's state follows.
            # (Terminals sees every turn/completed before the gate: see _handle_codex.)
            tools.turn_completed(note)
            subagents.turn_ending(note)
            self.async_tasks.turn_completed(note)
            prompts.turn_completed(note)
            approvals.turn_completed(note)
            subagents.turn_completed(note)
            error = note.turn.error.message if note.turn.error else None
            self.hub.state(facts.TurnEnded(note.threadId, note.turn.id, note.turn.status, error))
            self._release_turn_ends()

        return {
            "item/agentMessage/delta": streaming.agent_message_delta,
            "item/reasoning/summaryTextDelta": streaming.reasoning_delta,
            "item/reasoning/summaryPartAdded": streaming.reasoning_part_added,
            "item/started": item_started,
            "item/completed": item_completed,
            "turn/started": turn_started,
            "turn/completed": turn_completed,
            "thread/tokenUsage/updated": streaming.token_usage,
            "error": self.retries.error,
            "item/commandExecution/outputDelta": tools.output_delta,
            "item/commandExecution/terminalInteraction": tools.terminal_interaction,
            "item/fileChange/patchUpdated": tools.patch_updated,
            "item/mcpToolCall/progress": tools.mcp_progress,
            "turn/plan/updated": tools.plan_updated,
            "turn/diff/updated": self.file_reports.diff_updated,
            "thread/name/updated": tools.thread_name_updated,
            "serverRequest/resolved": approvals.resolved,
            "thread/status/changed": subagents.status_changed,
            "thread/settings/updated": self.settings.settings_updated,
            "account/login/completed": self.auth.login_completed,
            "account/rateLimits/updated": self.usage_limits.updated,
        }

    # -- state the shell and tests read ---------------------------------------------------

    @property
    def threads(self) -> Threads:
        """The thread-to-session identity map."""
        return self.hub.threads

    @property
    def client(self) -> Any:
        """The client-side JSON-RPC peer (the shell builds its own error replies with it)."""
        return self.hub.client

    @property
    def codex_ready(self) -> bool:
        return self.hub.codex_ready

    @property
    def client_waiting(self) -> bool:
        """Client messages wait for Codex's handshake (or its return) to be handled."""
        return bool(self._before_ready)

    @property
    def starting(self) -> bool:
        """Codex has neither finished its handshake nor been lost yet."""
        return not self.hub.codex_ready and self.hub.codex_lost_reason is None

    # -- inputs ------------------------------------------------------------------------

    def start(self) -> list[Effect]:
        """Begin the Codex handshake."""
        params = codex_types.InitializeParams(
            clientInfo=codex_types.ClientInfo(name=AGENT_NAME, version=__version__),
            capabilities=codex_types.InitializeCapabilities(experimentalApi=True),
        )
        self.hub.codex_request(
            "initialize", params, None, self._codex_initialized, self._codex_init_failed
        )
        return self.hub.take()

    def receive_client(self, data: bytes) -> list[Effect]:
        """One message from the ACP client."""
        waiting = self.starting or (self._recovering and len(self._before_ready) < MAX_WAITING)
        # initialize needs nothing from Codex: answered at once, unless something the
        # client sent before it still waits (the order of handling is kept).
        if waiting and (self._before_ready or not _is_initialize(data)):
            self._before_ready.append(data)
            return []
        self._guarded(self._handle_client, data)
        return self.hub.take()

    def receive_codex(self, data: bytes) -> list[Effect]:
        """One message from Codex's app-server."""
        # _guarded, inlined: every streamed delta comes this way.
        self._arrived.clear()
        try:
            self._handle_codex(data)
        except Exception:
            self._internal_error(data)
        return self.hub.take()

    def clock_read(self, request_id: RequestId, unix_seconds: int) -> list[Effect]:
        """The shell read the clock for :class:`~bridge.engine.core.effects.ReadClock`: the
        answer to Codex's ``currentTime/read``, in whole Unix seconds."""
        self.hub.answer_codex(
            request_id, codex_types.CurrentTimeReadResult(currentTimeAt=unix_seconds)
        )
        return self.hub.take()

    def client_lost(self) -> list[Effect]:
        """The client is gone: answer every Codex request still waiting on it (or, with
        a shared Codex, leave them for the next client; see ``detachable``)."""
        if self.detachable:
            return []
        self._guarded(lambda _: self.approvals.client_lost(), b"")
        return self.hub.take()

    def codex_lost(self, reason: str, *, retrying: bool = False) -> list[Effect]:
        """Codex is gone (process exited, socket closed): fail what waited on it.

        With ``retrying`` the shell is bringing Codex back: client messages that
        arrive meanwhile wait (up to :data:`MAX_WAITING` of them) for
        :meth:`codex_restarted`, or for :meth:`codex_gave_up`.
        """
        hub = self.hub
        if hub.codex_lost_reason is not None:
            return []
        hub.codex_lost_reason = reason
        hub.codex_ready = False
        self._recovering = retrying
        hub.open_codex_requests.clear()  # nobody is left to answer

        def lost(_: bytes) -> None:
            for _rid, waiting in hub.codex.abandon_pending():
                waiting.on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, reason))
            self.prompts.codex_lost(reason)
            self.approvals.codex_lost(reason)
            self.lifecycle.codex_lost(reason)
            self.auth.codex_lost(reason)
            self.subagents.codex_lost(reason)
            self.terminals.codex_lost()
            self._held_turn_ends.clear()  # their prompts were answered just above
            if not retrying:
                self._drain_before_ready()

        self._guarded(lost, b"")
        return hub.take()

    def codex_restarted(self) -> list[Effect]:
        """A new connection to Codex is open (restarted or reconnected): begin its
        handshake; once it is done, every session is resumed and the waiting client
        messages are handled, in order."""
        self.hub.reset_codex()
        self._restarted = True
        return self.start()

    def codex_gave_up(self, reason: str) -> list[Effect]:
        """The shell stopped bringing Codex back: what waited, and what comes, fails
        with ``reason``."""
        self._recovering = False
        self.hub.codex_lost_reason = reason

        def give_up(_: bytes) -> None:
            self._drain_before_ready()

        self._guarded(give_up, b"")
        return self.hub.take()

    # -- the one place an exception stops -------------------------------------------------

    def _guarded(self, handle: Callable[[bytes], None], data: bytes) -> None:
        """Run ``handle``; a defect in it is logged and answered, never raised."""
        self._arrived.clear()
        try:
            handle(data)
        except Exception:
            self._internal_error(data)

    def _internal_error(self, data: bytes) -> None:
        """A handler failed: log the traceback, and answer with -32603 every request,
        from either side, that arrived with ``data`` and is still unanswered (the
        engine cannot say how far it got)."""
        hub = self.hub
        log.exception("internal error handling %r", data[:200])
        message = f"{AGENT_NAME} internal error; see its log"
        for side, rid in self._arrived:
            if side == "client" and rid in hub.open_client_requests:
                hub.refuse_client(rid, RpcError.internal(message))
            elif side == "codex" and rid in hub.open_codex_requests:
                hub.refuse_codex(rid, ErrorCode.INTERNAL_ERROR, message)

    # -- the client's messages ----------------------------------------------------------

    def _handle_client(self, data: bytes) -> None:
        hub = self.hub
        msg = hub.client.receive(data)
        if isinstance(msg, IncomingRequest):
            hub.open_client_requests.add(msg.id)
            self._arrived.append(("client", msg.id))
            try:
                self._client_request(msg)
            except RpcError as exc:
                hub.refuse_client(msg.id, exc)
            if self._held_turn_ends:
                self._release_turn_ends()  # a close waits for no sub-agent
        elif isinstance(msg, IncomingNotification):
            if msg.method == "session/cancel":
                self._session_cancel(msg.params)
            else:
                log.info("ignoring client notification %s", msg.method)
        elif isinstance(msg, IncomingResponse):
            msg.context.on_result(msg.result)
        elif isinstance(msg, IncomingError):
            msg.context.on_error(msg.error)
        else:
            log.warning("client sent an invalid message: %s", msg.reason)
            if msg.reply is not None:
                hub.send_raw_to_client(msg.reply)

    def _client_request(self, msg: IncomingRequest) -> None:
        method, params = msg.method, msg.params
        if method != "initialize":
            self._past_initialize = True
        face = self.hub.face
        handler = face.requests.get(method)
        lost = self.hub.codex_lost_reason
        # initialize needs nothing from Codex: a client whose Codex could not start still
        # gets its answer, then the reason on each request that needs Codex (v2: on any
        # request, known or not).
        if (
            lost is not None
            and method != "initialize"
            and (handler is not None or face.version == 2)
        ):
            raise RpcError.internal(lost)
        if handler is None:
            raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")
        self._guard(method, params)
        handler(msg.id, params)

    def _guard(self, method: str, params: Raw) -> None:
        """Refuse a request that would change a sub-agent's session (the RFD)."""
        if not params:
            return
        try:
            session_id = _SESSION_PEEK.decode(params).sessionId
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return  # the handler reports the bad params
        if session_id:
            self.subagents.guard(method, session_id)

    def _after_catalog(self, handler: RequestHandler) -> RequestHandler:
        """``handler``, run once the model catalog is in (at once if it is): a request
        that waited is answered by it, or with the error it raised."""

        def deferred(rid: RequestId, raw: Raw) -> None:
            def run() -> None:
                hub = self.hub
                try:
                    if hub.codex_lost_reason is not None:
                        raise RpcError.internal(hub.codex_lost_reason)
                    handler(rid, raw)
                except RpcError as exc:
                    hub.refuse_client(rid, exc)
                except Exception:
                    log.exception("internal error handling a deferred request %s", rid)
                    if rid in hub.open_client_requests:
                        hub.refuse_client(rid, RpcError.internal(f"{AGENT_NAME} internal error"))

            self.settings.when_catalog_ready(run)

        return deferred

    def _session_cancel(self, raw: Raw) -> None:
        """``session/cancel``: the prompt, then what the session asked, then its sub-agents' work."""
        try:
            params = decode_params(raw, acp_types.CancelParams, "session/cancel")
        except RpcError as exc:
            log.warning("bad session/cancel notification: %s", exc.message)
            return
        record = self.hub.threads.session(params.sessionId)
        if record is None:
            log.warning("session/cancel for unknown session %s", params.sessionId)
        else:
            self.prompts.cancel(record)
            self.steering.cancelled(record)
        self.approvals.session_cancelled(params.sessionId)
        self._cancel_work(params.sessionId)

    def _initialize(self, rid: RequestId, raw: Raw) -> None:
        version = negotiation.negotiate(raw)
        if self._past_initialize and (version == 2 or self.hub.face.version == 2):
            # v2: initialize may be repeated only before any other request.
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "initialize may only be repeated before any other request",
            )
        if version == 2:
            self._initialize_v2(rid, raw)
            return
        params = decode_params(raw, acp_types.InitializeParams, "initialize")
        self.hub.speak(self._v1)  # the latest successful initialize decides
        self.hub.air = air.declared(params.clientCapabilities.meta)
        if self.hub.air is not None and air.NATIVE_SUBAGENTS in self.hub.air:
            # AIR's name for the subagents capability, which released SDKs can strip.
            params.clientCapabilities.subagents = params.clientCapabilities.subagents or {}
        self.hub.client_capabilities = params.clientCapabilities
        result = acp_types.InitializeResult(
            protocolVersion=acp_types.PROTOCOL_VERSION,
            agentCapabilities=acp_types.AgentCapabilities(
                promptCapabilities=acp_types.PromptCapabilities(image=True, embeddedContext=True),
            ),
            agentInfo=acp_types.Implementation(name=AGENT_NAME, title="Codex", version=__version__),
            meta=dict(acp_steering.SUPPORTED),
        )
        self.lifecycle.advertise(result)
        self.auth.advertise(result)
        self.usage_limits.advertise(result.agentCapabilities, params.clientCapabilities.meta)
        self.providers.advertise(result.agentCapabilities, params.clientCapabilities.meta)
        for method in (*PROVIDER_METHODS, air.ASYNC_TASK_STOP):  # the latest initialize decides
            self._client_requests.pop(method, None)
        self.providers.offer(self._client_requests)
        if self.async_tasks.on:
            self._client_requests[air.ASYNC_TASK_STOP] = self.async_tasks.stop
        if self.hub.air is not None:
            result.meta = air.advertised(result.meta, self.hub.air)
        self.hub.answer_client(rid, result)

    def _initialize_v2(self, rid: RequestId, raw: Raw) -> None:
        """ACP v2: the same engine behind the v2 face (:mod:`bridge.engine.faces.v2`).

        v2 clients understand sub-agents without declaring it (the RFD), and have no
        file system or terminal of their own to lend (v2 has no ``fs/*``, ``terminal/*``).
        """
        # Here, not at the top: a v1 client's start never pays for importing v2.
        from ...acp import v2 as acp_v2
        from ..faces import v2_requests
        from ..faces.v2 import V2Face

        params = decode_params(raw, acp_v2.InitializeParams, "initialize")
        hub = self.hub
        hub.client_capabilities = acp_types.ClientCapabilities(
            subagents={},
            elicitation=params.capabilities.elicitation,
            auth=params.capabilities.auth,
            # Compaction updates and notices are baseline updates in v2.
            session={"compaction": {}, "notices": {}},
        )
        admin = self.admin
        requests = v2_requests.requests(
            initialize=self._initialize,
            new_session=self.prompts.new_session,
            prompt=self.prompts.prompt,
            open_existing=self.lifecycle.open_existing,
            fork=self.lifecycle.fork,
            set_config=self.settings.set_config,
            status=admin.status,
            set_title=admin.set_title,
            archive=admin.archive,
            unarchive=admin.unarchive,
            delete=admin.delete,
            logout=admin.logout,
            cancel_tool_call=admin.cancel_tool_call,
            same_as_v1=self._client_requests,
            after_catalog=self._after_catalog,
        )
        face = V2Face(hub, requests, fork=self.lifecycle.fork_offered)
        info = acp_types.Implementation(name=AGENT_NAME, title="Codex", version=__version__)
        result = acp_types.InitializeResult(
            protocolVersion=1, agentCapabilities=acp_types.AgentCapabilities()
        )
        self.auth.advertise(result)
        v2_result = face.initialize_result(info, result.authMethods)
        v2_result.meta = dict(acp_steering.SUPPORTED)
        hub.air = air.declared(params.capabilities.meta)
        self.usage_limits.advertise(v2_result.capabilities, params.capabilities.meta)
        self.providers.advertise(v2_result.capabilities, params.capabilities.meta)
        self.providers.offer(requests)
        if self.async_tasks.on:
            requests[air.ASYNC_TASK_STOP] = self.async_tasks.stop
        if hub.air is not None:
            v2_result.meta = air.advertised(v2_result.meta, hub.air)
        hub.speak(face)
        hub.answer_client(rid, v2_result)

    # -- Codex's messages -----------------------------------------------------------------

    def _handle_codex(self, data: bytes) -> None:
        # A delta of the streamed answer, as Codex writes it, is decoded in one pass;
        # anything else, or anything that does not decode so, takes the general way.
        # (A slice compares faster than bytes.startswith, which parses its arguments.)
        if type(data) is bytes and len(data) <= _SHALLOW and data[:_DELTA_HEAD_LEN] == _DELTA_HEAD:
            delta = codex_messages.agent_message_delta(data)
            if delta is not None:
                # _route_codex for this one notification (no request, not turn/completed),
                # with its reaction taken from the same table.
                thread_id = delta.threadId
                if not (
                    thread_id
                    and thread_id not in self._session_ids
                    and self.subagents.gate(thread_id, Held(_DELTA, delta, None))
                ):
                    self._on_agent_message_delta(delta)
                return
        hub = self.hub
        msg = hub.codex.receive(data)
        if isinstance(msg, IncomingNotification):
            request_id: RequestId | None = None
        elif isinstance(msg, IncomingRequest):
            request_id = msg.id
            hub.open_codex_requests.add(request_id)
            self._arrived.append(("codex", request_id))
        elif isinstance(msg, IncomingResponse):
            msg.context.result(msg.result)
            return
        elif isinstance(msg, IncomingError):
            msg.context.on_error(msg.error)
            return
        else:
            log.warning("Codex sent an invalid message: %s", msg.reason)
            if msg.reply is not None:
                hub.send_raw_to_codex(msg.reply)
            return
        method = msg.method
        try:
            params = codex_messages.decode_params(method, msg.params)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
            # Codex sent a shape this bridge does not understand: say so once,
            # keep the connection (the next may be fine), never leave it waiting.
            log.warning("Codex %s not understood: %s", method, exc)
            if request_id is not None:
                hub.refuse_codex(request_id, ErrorCode.INVALID_PARAMS, f"not understood: {exc}")
            return
        self._route_codex(method, params, request_id)

    def _route_codex(self, method: str, params: Any, request_id: RequestId | None) -> None:
        """A decoded Codex notification or request, to what reacts to it."""
        # codex_messages.thread_of, inlined: every streamed delta comes this way.
        thread_id = getattr(params, "threadId", "")
        if not isinstance(thread_id, str):
            thread_id = ""
        if method == "turn/completed":
            # Before the gate: a closed session's interrupted turn still has commands to stop.
            self.terminals.turn_completed(params)
        observe = self._observers.get(method)
        if observe is not None:
            observe(params)
        unshown = thread_id and thread_id not in self._session_ids and method != _CLOCK
        if unshown and self.subagents.gate(thread_id, Held(method, params, request_id)):
            return
        if request_id is None:
            route = self._notifications.get(method)
            if route is None:
                log.debug("ignoring Codex notification %s", method)
            else:
                route(params)
        else:
            self._codex_request(request_id, method, params)

    def _codex_request(self, rid: RequestId, method: str, params: Any) -> None:
        handler = self._codex_requests.get(method)
        if handler is None:
            # Never leave Codex waiting on a request nobody will see.
            log.warning("Codex request %s is not supported; declining", method)
            self.hub.refuse_codex(
                rid, ErrorCode.METHOD_NOT_FOUND, f"{AGENT_NAME} does not support {method}"
            )
            return
        try:
            handler(rid, params)
        except RpcError as exc:
            self.hub.refuse_codex(rid, exc.code, exc.message)

    def _refeed(self, message: Held) -> None:
        """Handle a message the sub-agent gate held, as if it arrived now."""
        if message.request_id is not None:
            self._codex_request(message.request_id, message.method, message.params)
            return
        route = self._notifications.get(message.method)
        if route is not None:
            route(message.params)

    # -- the Codex handshake ----------------------------------------------------------------

    def _codex_initialized(self, result: object) -> None:
        self._check_version(result)
        self.hub.codex_ready = True
        self.hub.codex_notification("initialized")
        # While the client does its own handshake: the first session's answer lists the models.
        self.settings.ask_catalog()
        if self._restarted:
            self._restarted = False
            self._recovering = False
            self.recovery.recover()
        self._drain_before_ready()

    def _check_version(self, result: object) -> None:
        """One warning when Codex is outside the tested versions (its ``userAgent`` names
        it: ``codex-acp-bridge/0.169.0 (...)``), once per Codex connection."""
        try:
            agent = _USER_AGENT.decode(result if isinstance(result, bytes | Raw) else b"{}")
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        self.codex_user_agent = agent.userAgent
        warning = codex_versions.drift_warning(agent.userAgent)
        if warning is not None:
            log.warning("%s", warning)

    def _codex_init_failed(self, error: ErrorObject) -> None:
        if self.hub.codex_lost_reason is not None and self._recovering:
            return  # lost during the handshake, and being brought back: keep waiting
        if self.hub.codex_lost_reason is None:  # else: lost, and the reason says how
            self.hub.codex_lost_reason = f"Codex app-server refused initialize: {error.message}"
        self._recovering = False
        self._drain_before_ready()

    def _drain_before_ready(self) -> None:
        waiting, self._before_ready = self._before_ready, []
        for data in waiting:
            self._guarded(self._handle_client, data)

    # -- what one feature asks of the others ------------------------------------------------

    def _thread_starting(
        self, mcp_servers: list[dict[str, Any]] | None, start: codex_types.ThreadStartParams
    ) -> None:
        self.lifecycle.thread_starting(mcp_servers, start)
        self.providers.thread_starting(start)

    def _session_opened(
        self, record: ThreadRecord, rid: RequestId, result: Any, opened: Any
    ) -> None:
        """A session opened (new, load, resume, fork): its settings fill the result, the
        result goes out, then what may only follow it (the commands, the current state
        of sub-agents a load replayed)."""
        self.settings.session_opened(record, result, opened)
        self.hub.state(facts.SessionOpened(record, rid, result))
        self.settings.session_announced(record)
        self.subagent_history.after_response(record)

    def _open_root(self, thread_id: str, cwd: str) -> ThreadRecord:
        """The client opened a session on ``thread_id``: what was held for it is handled now."""
        record = self.hub.threads.open_root(thread_id, cwd)
        self.subagents.session_added(record)
        return record

    def _cancel_work(self, session_id: str) -> None:
        """Cancel the work under ``session_id`` (``session/cancel``, ``session/close``):
        its sub-agents' turns, then every command the cancelled threads left running."""
        threads = self.hub.threads
        record = threads.session(session_id)
        self.subagents.cancel_tree(session_id)
        if record is None:
            return  # never stop the commands of a thread the client does not hold
        tree = [record, *threads.descendants(session_id)]
        self.terminals.work_cancelled(
            [r.id for r in tree], running=[r.id for r in tree if r.turn is not None]
        )

    def _cancelled_work_running(self, note: codex_types.TurnNotification) -> bool:
        """``note`` ends a turn the user cancelled while sub-agent turns its cancel stopped
        still run (interrupted, not refused: Codex will end them). A session being closed
        waits for nothing: nothing of it reaches the client after the close."""
        record = self.hub.threads.session(note.threadId)
        turn = record.turn if record is not None else None
        if record is None or turn is None or not turn.cancel_requested:
            return False
        if record.closing is not None:
            return False
        if turn.id is not None and turn.id != note.turn.id:
            return False
        return any(
            child.turn is not None
            and child.turn.cancel_requested
            and child.turn.interrupt_sent
            and not child.turn.interrupt_refused
            for child in self.hub.threads.descendants(record.id)
        )

    def _release_turn_ends(self) -> None:
        """Handle each held ``turn/completed`` whose cancelled sub-agents have stopped."""
        for thread_id, note in list(self._held_turn_ends.items()):
            if self._held_turn_ends.get(thread_id) is note and not self._cancelled_work_running(
                note
            ):
                del self._held_turn_ends[thread_id]
                self._notifications["turn/completed"](note)

    def _prompt_settled(self, record: ThreadRecord) -> None:
        self.lifecycle.prompt_settled(record)
        self.steering.turn_ended(record)

    def forget(self, thread_id: str) -> None:
        """Forget a thread and every sub-agent under it, answering what they held (or,
        when another client's turn runs on it, leaving Codex's requests to that client)."""
        root = self.hub.threads.get(thread_id)
        others = root is not None and self.approvals.others_turn(root)
        for record in self.hub.threads.forget(thread_id):
            self.approvals.thread_forgotten(record, answer=not others)
        self._release_turn_ends()  # no turn of a forgotten sub-agent is awaited


class _SessionPeek(msgspec.Struct):
    sessionId: str = ""


# Decoding one field of params and skipping the rest is cheap enough for every request.
_SESSION_PEEK = msgspec.json.Decoder(_SessionPeek)


class _UserAgent(msgspec.Struct):
    userAgent: str = ""


_USER_AGENT = msgspec.json.Decoder(_UserAgent)


class _MethodPeek(msgspec.Struct):
    method: object = None


_METHOD_PEEK = msgspec.json.Decoder(_MethodPeek)


#: Offered by the providers feature to a client that asks (see its module).
PROVIDER_METHODS = ("providers/list", "providers/set", "providers/disable")


def _is_initialize(data: bytes) -> bool:
    """``data`` is the client's ``initialize``: its answer needs nothing from Codex, so
    it never waits for Codex's handshake (only read while Codex is not ready)."""
    try:
        return _METHOD_PEEK.decode(data).method == "initialize"
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return False  # handled, and answered, in its turn


def _any_absolute_path(path: str) -> bool:
    # Without a file system to ask (a replay of an old recording), trust the client.
    return True
