"""The bridge's engine: ACP and Codex messages in, messages out.

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
   message still waits (then it waits behind it, as before). The states this
   takes are :mod:`bridge.engine.core.connection`'s.
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
   threads left running stop too (:mod:`bridge.engine.features.tools.terminals`). No update
   of a turn follows its answer: its tool calls still open end first, and a
   cancelled turn ends after the sub-agent turns its cancel stopped
   (:mod:`bridge.engine.features.prompts.turn_ends`).
5. Bad input is answered with a typed JSON-RPC error (-32700, -32600, -32601,
   -32602, or not-found) and changes nothing else; the connection goes on. No
   input, from either side, makes :meth:`Engine.receive_client` or
   :meth:`Engine.receive_codex` raise: a defect in a handler is logged with its
   traceback and the request that met it answered with -32603.

Structure. This module is the wiring, and nothing else: the only one that builds
the features (:mod:`bridge.engine.features`), handing each its collaborators as
objects, and the only one that knows the order in which several of them react to
one message: what one event does (``turn/completed``, ``item/completed``, a prompt's
end...) is one method here that calls each consequence in order (``Engine.turn_completed``
and its like), read top to bottom. It holds the routing tables:
:func:`~bridge.engine.routes.codex_routes` (each Codex method → the type its params
decode into → the features that react, in order) and
:func:`~bridge.engine.routes.v1_requests` (each client method → its handler, ACP v1's; v2's is
:func:`bridge.engine.faces.v2_requests.requests`, over the same features). The
features state facts (:mod:`bridge.engine.core.facts`) that the hub's face
(:mod:`bridge.engine.faces`, v1's until ``initialize`` picks v2) renders; the faces
are built here too and handed to the connection, so the rooms below import one way
(``core/`` none of the others). Below it, in ``core/``: :mod:`~bridge.engine.core.connection` (the connection's states),
:mod:`~bridge.engine.core.codex_routing` (a Codex message decoded once and routed,
through the sub-agent gate), :mod:`~bridge.engine.core.client_routing` (a client
message to its handler), :mod:`~bridge.engine.core.hub` (what every feature shares).
Where two features need each other, the engine joins them, and no feature is handed a
callable of the engine's: a feature says what happened (``hub.happened``,
:mod:`bridge.engine.core.news`: a prompt's end, a session ready, a close due) as the
last thing it does, and the engine decides what follows (:meth:`Engine._react`), once
the feature returns, each item's consequences before the next item's
(``tests/test_wiring.py`` keeps it so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from msgspec import Raw

from .. import acp, codex
from ..acp import types as acp_types
from ..codex import messages as codex_messages
from ..codex import types as codex_types
from ..jsonrpc import ErrorCode, RequestId, RpcError
from ..jsonrpc.peer import ErrorObject
from ..wire import declared, modules_of, prepare_lazy_decoders
from .core import AGENT_NAME, client_routing, facts, news
from .core.answers import decode_params, prepare_decoders
from .core.backstop import Backstop
from .core.codex_routing import CodexRouter
from .core.connection import MAX_WAITING, Connection, HandshakeFace
from .core.effects import Effect
from .core.hub import Hub, RequestHandler
from .core.machines import MachineOffer
from .core.threads import ThreadRecord, Threads
from .faces.v1 import V1Face
from .features.approvals.approvals import Approvals
from .features.extensions.extensions import Extensions
from .features.palette.palette import Palette
from .features.prompts.file_reports import FileReports
from .features.prompts.prompts import Prompts
from .features.prompts.proposed_plans import ProposedPlans
from .features.prompts.retries import Retries
from .features.prompts.streaming import Streaming
from .features.prompts.turn_ends import TurnEnds
from .features.sessions.admin import SessionAdmin
from .features.sessions.auth import Authentication
from .features.sessions.index import SessionIndex
from .features.sessions.lifecycle import Lifecycle
from .features.sessions.mcp_servers import McpServers
from .features.sessions.opening import NewSessions, Opening
from .features.sessions.recovery import Recovery
from .features.settings.machines import Machines
from .features.settings.settings import SettingsSelectors
from .features.subagents.history import SubagentHistory
from .features.subagents.rejoin import SubagentRejoin
from .features.subagents.subagents import Subagents
from .features.tools.terminals import Terminals
from .features.tools.tools import Tools
from .routes import codex_routes, v1_requests

log = logging.getLogger(__name__)

__all__ = ["AGENT_NAME", "MAX_WAITING", "Engine"]


class Engine:
    """Translate between one ACP client and one Codex app-server connection.

    Call :meth:`start` once, then feed every message with
    :meth:`receive_client` / :meth:`receive_codex`, and report a lost Codex
    with :meth:`codex_lost` and a client that left with :meth:`client_lost`.
    Each call returns the effects to carry out, in order.

    ``thread_config``: the ``-c key=value`` overrides sent with every
    ``thread/start``; ``profiles``: Codex's config profiles, each as the ``config`` sent
    instead while it is in force (the ``profile`` option picks one; ``profile`` is the
    one at first). ``api_key``: an OpenAI API key from the bridge's
    environment, for ``authenticate``. ``is_directory``: whether a path is an
    existing directory (the shell asks the file system; a replay answers as
    the recording says); ``real_path``: a path with its symlinks resolved (the same, or as
    recorded; without it, the path as written). The engine reads no environment and no
    file itself.
    """

    def __init__(
        self,
        *,
        thread_config: dict[str, Any] | None = None,
        profiles: Mapping[str, dict[str, Any]] | None = None,
        profile: str | None = None,
        api_key: str | None = None,
        is_directory: Callable[[str], bool] | None = None,
        real_path: Callable[[str], str] | None = None,
        detachable: bool = False,
        paged_store: bool = False,
        codex_shared: bool = False,
        machines: Sequence[MachineOffer] = (),
        stored_machine: Callable[[str], str | None] | None = None,
    ) -> None:
        hub = self.hub = Hub(
            thread_config=thread_config,
            profiles=profiles,
            profile=profile,
            api_key=api_key,
            # Without a file system to ask (a replay of an old recording), trust the client.
            is_directory=is_directory or (lambda _path: True),
            # Without one, paths are judged as written (a replay of an old recording).
            real_path=real_path or str,
            paged_store=paged_store,
            codex_shared=codex_shared or detachable,
            stored_machine=stored_machine,
        )
        #: The thread-to-session identity map.
        self.threads: Threads = hub.threads
        #: The client-side JSON-RPC peer (the shell builds its own error replies with it).
        self.client = hub.client.peer
        #: Codex is shared (a daemon's, or one attached by URL) and outlives this
        #: client: when the client leaves, what waits on the user is left waiting,
        #: for the next client that resumes the thread.
        self.detachable = detachable
        #: The one place an exception stops (rule 5).
        self._guard = Backstop(hub)
        self._guarded = self._guard.run
        self._arrived = self._guard.arrived  # cleared for every streamed delta
        self._news = hub.news  # what the features said happened: tested for every message

        # Each feature is built after the ones it is handed (see "Structure" above).
        self.approvals = Approvals(hub)
        self.tools = Tools(hub)
        self.streaming = Streaming(hub)
        self.settings = settings = SettingsSelectors(hub)
        self.machines = Machines(hub, machines)
        self.auth = Authentication(hub)
        self.mcp_servers = McpServers(hub)
        self.terminals = Terminals(hub)
        self.turn_ends = TurnEnds(hub)
        self.subagents = subagents = Subagents(
            hub, questions=self.approvals, terminals=self.terminals
        )
        self.subagent_history = SubagentHistory(hub, subagents=subagents)
        self.palette = Palette(hub, settings=settings, mcp=self.mcp_servers)
        self.proposed_plans = ProposedPlans(hub, settings=settings)
        self.prompts = Prompts(
            hub,
            settings=settings,
            palette=self.palette,
            machines=self.machines,
            plans=self.proposed_plans,
        )
        self.steering = self.prompts.steering
        self.retries = Retries(hub, prompts=self.prompts)
        self.session_index = SessionIndex(hub)
        # What a client turns on at initialize: usage limits, providers, async tasks.
        self.extensions = ext = Extensions(hub, self.session_index)
        self.file_reports = FileReports(hub)
        self.opening = opening = Opening(hub, mcp=self.mcp_servers, held=subagents)
        self.new_sessions = NewSessions(hub, opening=opening, providers=ext.providers)
        self.lifecycle = Lifecycle(
            hub,
            opening=opening,
            history=self.subagent_history,
            prompts=self.prompts,
            subagents=subagents,
            index=self.session_index,
            rejoin=SubagentRejoin(hub),
        )
        self.recovery = Recovery(hub, subagents=subagents, prompts=self.prompts)
        self.admin = SessionAdmin(hub, sessions=self.lifecycle)
        #: Each client method → its handler, as ACP v1 has it (filled below, once the
        #: connection that answers ``initialize`` is built): a v1 client is spoken to
        #: until ``initialize`` says otherwise.
        self._client_requests: dict[str, RequestHandler] = {}
        self.connection = Connection(
            hub,
            catalog=settings,
            recovery=self.recovery,
            machines=self.machines,
            offers=(self.lifecycle, self.admin, self.auth),
            extensions=ext,
            v1_face=V1Face(hub, self._client_requests),
            v1_requests=self._client_requests,
        )
        self._client_requests.update(v1_requests(self))
        self.client_router = client_routing.ClientRouter(
            hub,
            {"session/cancel": self._session_cancel, "$/cancel_request": self._cancel_request},
            connection=self.connection,
            guard=subagents,
            arrived=self._arrived,
        )
        self.codex_router = CodexRouter(
            hub, codex_routes(self), gate=subagents, arrived=self._arrived
        )

    # -- state the shell and tests read ---------------------------------------------------

    @property
    def codex_ready(self) -> bool:
        """Codex finished its handshake; the rest of the connection's state is
        :attr:`connection`'s (:mod:`bridge.engine.core.connection`)."""
        return self.hub.codex.ready

    @property
    def client_waiting(self) -> bool:
        """Client messages wait for Codex's handshake (or its return) to be handled."""
        return self.connection.client_waiting

    @property
    def starting(self) -> bool:
        """Codex has neither finished its handshake nor been lost yet (STARTING or
        RESTARTING)."""
        return self.connection.starting

    def census(self) -> dict[str, int]:
        """What the engine holds now: its thread records and the requests still open either
        way (a long life's measure, ``bench/soak.py``; flat once idle)."""
        hub = self.hub
        return {
            **hub.threads.census(),
            "openClientRequests": len(hub.client.open_requests),
            "openCodexRequests": len(hub.codex.open_requests),
            "awaitingClient": len(hub.client.peer.pending),
            "awaitingCodex": len(hub.codex.peer.pending),
        }

    # -- inputs ------------------------------------------------------------------------

    def start(self) -> list[Effect]:
        """Begin the Codex handshake."""
        self.connection.start()
        return self._take()

    def prepare(self) -> None:
        """Build what the first request of each kind would otherwise build while its client
        waits: the decoders of the client's params, of Codex's answers and of the messages
        Codex sends (:func:`bridge.codex.messages.prepare_decoders`,
        :func:`bridge.wire.lazy_decoder`: not built at import, so that ``initialize`` is
        answered sooner). msgspec's first for a type costs up to 0.4 ms (a ``session/list``
        page's, say); all of them, about 5 ms. No effects: the shell calls it once Codex has
        been asked for its handshake, so the work overlaps Codex's start."""
        prepare_decoders(declared(modules_of(acp), "Params"))
        prepare_decoders(declared(modules_of(codex), "Result"))
        codex_messages.prepare_decoders()
        prepare_lazy_decoders()

    def receive_client(self, data: bytes) -> list[Effect]:
        """One message from the ACP client."""
        if self.connection.wait(data):
            return []
        self._guarded(self._handle_client, data)
        return self._take()

    def receive_codex(self, data: bytes) -> list[Effect]:
        """One message from Codex's app-server."""
        # _guarded, inlined: every streamed delta comes this way.
        self._arrived.clear()
        try:
            self.codex_router.receive(data)
            if self._news:
                self._follow()
        except Exception:
            self._guard.failed(data)
        return self._take()

    def clock_read(self, request_id: RequestId, unix_seconds: int) -> list[Effect]:
        """The shell read the clock for :class:`~bridge.engine.core.effects.ReadClock`: the
        answer to Codex's ``currentTime/read``, in whole Unix seconds (or to a feature's
        :meth:`~bridge.engine.core.codex_link.CodexLink.ask_clock`)."""
        if self.hub.codex.clock_read(request_id, unix_seconds):
            return self._take()
        self.hub.codex.answer(
            request_id, codex_types.CurrentTimeReadResult(currentTimeAt=unix_seconds)
        )
        return self._take()

    def client_lost(self) -> list[Effect]:
        """The client is gone: answer every Codex request still waiting on it (or, with
        a shared Codex, leave them for the next client; see ``detachable``)."""
        self._guarded(lambda _: self.proposed_plans.client_lost(), b"")
        if self.detachable:
            return self._take()
        self._guarded(lambda _: self.approvals.client_lost(), b"")
        return self._take()

    def codex_lost(self, reason: str, *, retrying: bool = False) -> list[Effect]:
        """Codex is gone (process exited, socket closed): fail what waited on it.

        With ``retrying`` the shell is bringing Codex back: client messages that
        arrive meanwhile wait (up to :data:`MAX_WAITING` of them) for
        :meth:`codex_restarted`, or for :meth:`codex_gave_up`.
        """
        hub, subagents = self.hub, self.subagents
        if not self.connection.lost(reason, retrying=retrying):
            return []

        def lost(_: bytes) -> None:
            for _rid, waiting in hub.codex.peer.abandon_pending():
                waiting.on_error(ErrorObject(ErrorCode.INTERNAL_ERROR, reason))
            self._follow()  # what those failures ended, before each feature hears of the loss
            for feature in (self.prompts, self.approvals, self.lifecycle, self.auth, subagents):
                feature.codex_lost(reason)
                self._follow()
            self.mcp_servers.codex_lost()
            self.streaming.codex_lost()
            self.proposed_plans.codex_lost(reason)
            self.terminals.codex_lost()
            self.turn_ends.clear()  # their prompts were answered just above
            if not retrying:
                self.connection.drain()

        self._guarded(lost, b"")
        return self._take()

    def machine_answered(
        self, key: str, result: bytes | None, code: int = 0, message: str = ""
    ) -> list[Effect]:
        """The shell's answer to :class:`~bridge.engine.core.effects.MachineCall` ``key``:
        the exec-server's ``result`` (JSON), else its error (``code``, ``message``), or
        why the shell could not ask (-32603)."""
        error = None if result is not None else ErrorObject(code, message)
        self._guarded(lambda _: self.hub.codex.machine_answered(key, result, error), b"")
        return self._take()

    def machine_changed(self, name: str, state: str, reason: str = "") -> list[Effect]:
        """The shell's word on machine ``name``'s link (``connecting``, ``connected``,
        ``down`` with ``reason``): prompts that waited for it go, or fail naming it."""
        self._guarded(lambda _: self.machines.changed(name, state, reason), b"")
        return self._take()

    def codex_restarted(self) -> list[Effect]:
        """A new connection to Codex is open (restarted or reconnected): begin its
        handshake; once it is done, every session is resumed and the waiting client
        messages are handled, in order."""
        self.connection.restarted()
        return self._take()

    def codex_gave_up(self, reason: str) -> list[Effect]:
        """The shell stopped bringing Codex back: what waited, and what comes, fails
        with ``reason``."""
        self.connection.gave_up(reason)
        self._guarded(lambda _: self.connection.drain(), b"")
        return self._take()

    # -- the client's messages ----------------------------------------------------------

    def _handle_client(self, data: bytes) -> None:
        handled = self.client_router.receive(data)
        self._follow()
        if handled and self.turn_ends.waiting:
            self._release_turn_ends()  # a close waits for no sub-agent

    def _cancel_request(self, raw: Raw) -> None:
        """``$/cancel_request``: a long request of the client's (a load, a resume, a list,
        a fork) is stopped and answered -32800; a prompt whose turn runs is cancelled as
        ``session/cancel`` cancels it (answered ``cancelled`` once Codex confirms, what it
        waits on withdrawn); any other is answered as its work ends."""
        try:
            params = decode_params(raw, acp_types.CancelRequestParams, "$/cancel_request")
        except RpcError as exc:
            log.warning("bad $/cancel_request notification: %s", exc.message)
            return
        rid = params.requestId
        for record in self.hub.threads.sessions():
            if record.turn is not None and record.turn.request_id == rid:
                prompt = record.prompts.get(rid)
                if self.hub.client.face.version == 2 and prompt is not None and prompt.message_id:
                    # Answered once inserted (v2), its turn the session's work now: the
                    # cancel of a request that is over stops nothing (session/cancel does).
                    log.debug("$/cancel_request for answered prompt %r: nothing", rid)
                    return
                self._cancel_session(record.id)
                return
        self.hub.client.cancel_request(rid)

    def _session_cancel(self, raw: Raw) -> None:
        """``session/cancel``: the prompt, then what the session asked, then its sub-agents' work."""
        try:
            params = decode_params(raw, acp_types.CancelParams, "session/cancel")
        except RpcError as exc:
            log.warning("bad session/cancel notification: %s", exc.message)
            return
        self._cancel_session(params.sessionId)

    def _cancel_session(self, session_id: str) -> None:
        record = self.hub.threads.session(session_id)
        if record is None:
            log.warning("session/cancel for unknown session %s", session_id)
        else:
            self.prompts.cancel(record)
            self._follow()  # the prompts queued behind the turn answered cancelled
            self.steering.cancelled(record)
            self.proposed_plans.withdraw(record.id)
        self.approvals.session_cancelled(session_id)
        self.subagents.cancel_work(session_id)

    def after_catalog(self, handler: RequestHandler) -> RequestHandler:
        """A session's first answer lists every model: ``handler`` opens one once the
        catalog asked at the handshake is in (see bridge.engine.features.settings.settings)."""
        return client_routing.after_catalog(self.hub, self.settings, handler)

    def _v2_face(self) -> tuple[HandshakeFace, dict[str, RequestHandler]]:
        """ACP v2's face and request table (:mod:`bridge.engine.faces.v2_requests`), over
        the same features' methods v1's handlers reach; built when a client picks v2."""
        # Here, not at the top: a v1 client's start never pays for importing v2.
        from .faces import v2_requests
        from .faces.v2 import V2Face

        requests = v2_requests.requests(
            initialize=self.connection.initialize,
            new_sessions=self.new_sessions,
            prompts=self.prompts,
            lifecycle=self.lifecycle,
            settings=self.settings,
            admin=self.admin,
            same_as_v1=self._client_requests,
            hub=self.hub,
        )
        requests["session/prompt"] = self.file_reports.asking(requests["session/prompt"])
        return V2Face(self.hub, requests, fork=self.lifecycle.fork_offered), requests

    # -- what one feature asks of the others ------------------------------------------------

    def current_time_read(self, rid: RequestId, params: codex_types.CurrentTimeReadParams) -> None:
        self.hub.codex.read_clock(rid)

    # -- what one event does, in order ------------------------------------------------------

    def item_started(self, note: codex_messages.ItemNotification) -> None:
        """Codex started an item on a session's thread."""
        # A user message item names the prompt awaiting it: inserted before anything of it.
        self.prompts.item_started(note)
        # An answer's phase (and whether it is shown at all); a tool call announced; a file
        # change or MCP call kept as Codex wrote it (a permission request shows it); a
        # collab call (spawn, wait...) shown.
        self.streaming.item_started(note)
        self.tools.item_started(note)
        self.approvals.item_started(note)
        self.subagents.item_started(note)

    def item_completed(self, note: codex_messages.ItemNotification) -> None:
        """Codex completed an item on a session's thread."""
        # Steered input shown where it entered the turn; an answer's text that did not
        # stream; the tool call finished; a command running as a task ended; the raw item
        # a permission request would show dropped; a collab call finished (or a message
        # a sub-agent received shown).
        self.steering.item_completed(note)
        self.streaming.item_completed(note)
        self.tools.item_completed(note)
        self.extensions.async_tasks.item_completed(note)
        self.approvals.item_completed(note)
        self.subagents.item_completed(note)
        # A proposed plan noted: its turn's end asks whether to implement it.
        self.proposed_plans.item_completed(note)

    def turn_started(self, note: codex_types.TurnNotification) -> None:
        """Codex started a turn on a session's thread."""
        # The session's turn named (or another client's taken as the session's); the
        # diff a file report will read begins; a sub-agent's turn and its state (a turn of
        # cancelled work stopped at once); then the fact, for the face.
        self.prompts.turn_started(note)
        self.file_reports.turn_started(note)
        self.subagents.turn_started(note)
        self.proposed_plans.turn_started(note)  # the session moved on: no question stands
        self.prompts.state_turn_started(note)

    def turn_completed_anywhere(self, note: codex_types.TurnNotification) -> None:
        """Codex ended a turn, on any thread, before the sub-agent gate: a closed session's
        interrupted turn still has commands to stop; the session list's row changes."""
        self.terminals.turn_completed(note)
        self.session_index.turn_completed(note)

    def turn_completed(self, note: codex_types.TurnNotification) -> None:
        """Codex ended a turn on a session's thread (or a turn end held here is released)."""
        # A cancelled turn's end waits for the sub-agent turns its cancel stopped
        # (features.prompts.turn_ends): routed again from here once they have ended.
        if self.turn_ends.hold(note):
            return
        # The turn's tool calls still open end first (no update may follow the prompt's
        # answer), a sub-agent's collab calls on its parent too, and its commands that
        # outlive it stay as tasks.
        self.tools.turn_completed(note)
        self.subagents.turn_ending(note)
        self.extensions.async_tasks.turn_completed(note)
        # The prompt is answered (a close waiting on it finishes; the next
        # queued prompt starts), then what the turn still asked is withdrawn, then a
        # sub-agent's work state follows, then the fact, for the face (after the answer).
        self.prompts.turn_completed(note)
        self._follow()
        self.streaming.turn_completed(note)  # what the thread cost so far, where Codex knows
        self.approvals.turn_completed(note)
        self.subagents.turn_completed(note)
        self.prompts.state_turn_ended(note)
        # A plan it proposed: "Implement this plan?", once the session is idle.
        self.proposed_plans.turn_completed(note)
        # Turn ends held behind this turn's sub-agents may go now.
        self._release_turn_ends()

    def _release_turn_ends(self) -> None:
        """Each held ``turn/completed`` whose cancelled sub-agents have stopped, now."""
        for note in self.turn_ends.released():
            self.turn_completed(note)

    def _session_opened(
        self, record: ThreadRecord, rid: RequestId, result: Any, opened: Any
    ) -> None:
        """A session opened (new, load, resume, fork): its settings fill the result, the
        result goes out, then what may only follow it (the commands, the current state
        of sub-agents a load replayed)."""
        self.settings.session_opened(record, result, opened)
        # The end of a load's replayed transcript: said before the answer.
        self.machines.session_opened(record)
        self.hub.client.state(facts.SessionOpened(record, rid, result))
        self.settings.session_announced(record)
        self.mcp_servers.session_opened(record)
        self.subagent_history.after_response(record)
        self.extensions.async_tasks.session_opened(record, result)
        self.subagent_history.traffic_released(record)

    def _prompt_ended(self, fact: facts.PromptEnded) -> None:
        """A prompt's work ended (the prompts feature says how), answered once: nothing
        more of a prompt answered already (a defect's -32603)."""
        if not self.hub.client.answering(fact.request_id):
            return
        usage = self.extensions
        # AIR's record of a failed turn (in v1's answer; on v2's stream, sent now), then
        # the answer's quota (the tokens used, or quotaExceeded), then AIR's report of the
        # files the turn changed (before the answer), then the answer (v1) or the work's
        # end (v2), through the face.
        fact = usage.usage_limits.record_failure(fact)
        fact = usage.quotas.with_quota(fact)
        self.file_reports.report_files(fact)
        self.hub.client.state(fact)

    # -- what follows what a feature said happened (bridge.engine.core.news) --------------

    def _take(self) -> list[Effect]:
        """The effects of one input, once what the features said happened is followed
        (each input's handler follows it itself: this is for a handler that failed)."""
        while self._news:
            self._guarded(lambda _: self._follow(), b"")
        return self.hub.take()

    def _follow(self) -> None:
        """What the features said happened, in the order they said it, each item's own
        consequences before the next item's."""
        for said in self.hub.take_news():
            if isinstance(said, facts.PromptEnded | news.SessionReady | news.V2Chosen):
                # A defect in what follows answers the client's request all the same.
                self._arrived.append(("client", said.request_id))
            self._react(said)
            if self._news:
                self._follow()

    def _react(self, said: news.News) -> None:
        match said:
            case facts.PromptEnded():
                self._prompt_ended(said)
            case news.WorkEnded(record=record):
                # A close waiting on the prompt finishes first (the session is gone for
                # what follows), then waiting steers meet an idle session, then the next
                # queued prompt starts.
                self.lifecycle.prompt_answered(record)
                self._follow()
                self.steering.turn_ended(record)
                self.prompts.start_next(record)
            case news.SessionReady():
                self._session_opened(said.record, said.request_id, said.result, said.opened)
            case news.CloseDue(record=record, waiting=waiting):
                self.forget(record.id)
                self.lifecycle.closed(record, waiting)
            case news.TurnWanted(record=record, inputs=inputs):
                self.prompts.start_turn(record, list(inputs))
            case news.ClientWaited(messages=messages):
                for data in messages:
                    self._guarded(self._handle_client, data)
            case news.V2Chosen(request_id=rid, params=params):
                self.connection.speak_v2(rid, params, *self._v2_face())
            case news.InterruptRefused():
                self._release_turn_ends()

    def forget(self, thread_id: str) -> None:
        """Forget a thread and every sub-agent under it, answering what they held (or,
        when another client's turn runs on it, leaving Codex's requests to that client)."""
        root = self.hub.threads.get(thread_id)
        others = root is not None and self.approvals.others_turn(root)
        self.proposed_plans.withdraw(thread_id)
        self.machines.release(thread_id)  # its own container, on a per-session machine
        for record in self.hub.threads.forget(thread_id):
            self.approvals.thread_forgotten(record, answer=not others)
        self._release_turn_ends()  # no turn of a forgotten sub-agent is awaited
