"""The connection's states: Codex's handshake, the client messages that wait for it,
Codex brought back, and how far the client's own handshake is.

Codex's side is in one of five states (:class:`CodexState`); the shell's reports
(:class:`~bridge.engine.engine.Engine`'s ``codex_lost``, ``codex_restarted``,
``codex_gave_up``) and Codex's answer to ``initialize`` move it::

    from        on                                        to
    STARTING    Codex answers initialize                  READY
    STARTING    Codex refuses it                          LOST
    any but     Codex lost, the shell brings it back      RECOVERING
      LOST,     Codex lost for good                       LOST
      RECOVERING
    RECOVERING  a new connection is open                  RESTARTING
    RECOVERING  the shell gives up                        LOST
    RESTARTING  Codex answers initialize                  READY, every session resumed
    RESTARTING  Codex refuses it                          LOST

- **STARTING**: :meth:`Connection.start` sent Codex ``initialize``. Client
  messages wait, in order (rule 2 of :mod:`bridge.engine.engine`), except
  the client's ``initialize``, whose answer needs nothing from Codex: it is
  handled at once unless an earlier message still waits (then behind it).
- **READY**: Codex answered ``initialize``; the bridge sent ``initialized`` and
  asked for the model catalog, and what waited is handled now.
- **RECOVERING**: Codex was lost and the shell brings it back
  (``codex_lost(retrying=True)``): what waited on the lost Codex failed with the
  reason; client messages wait again, up to :data:`MAX_WAITING` of them (past
  that they are handled at once, and fail with the reason).
- **RESTARTING**: a new connection's handshake (``codex_restarted``); messages
  wait as when STARTING. Once Codex answers, every session is resumed
  (:mod:`bridge.engine.features.sessions.recovery`), then what waited is handled.
- **LOST**: Codex refused ``initialize``, was lost for good, or the shell gave
  up bringing it back. What waited, and what comes, is answered with the reason
  (``hub.codex.lost_reason``), except ``initialize``. Only a restart leaves it.

The state is kept once, on the hub (``hub.codex.side``, :mod:`bridge.engine.core.codex_side`,
whose table refuses any other move); only this module moves it. The features read it as
``hub.codex.ready`` (READY) and ``hub.codex.lost_reason`` (RECOVERING or LOST: why).

The client's side (:class:`ClientState`) is **OPENING** until the client sends a
request other than ``initialize``, then **OPEN**: ACP v2 allows ``initialize``
again only while OPENING. The ACP version agreed at ``initialize`` is the face
the hub speaks through (``hub.client.face``: v1's from the start, v2's once a client's
``initialize`` asks for it; the latest successful ``initialize`` decides).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol, TypeAlias

import msgspec
from msgspec import Raw

from ... import __version__
from ...acp import air, negotiation
from ...acp import steering as acp_steering
from ...acp import types as acp_types
from ...codex import types as codex_types
from ...codex import versions as codex_versions
from ...jsonrpc import ErrorCode, RequestId, RpcError
from ...jsonrpc.peer import ErrorObject
from . import AGENT_NAME, news
from .answers import decode_params
from .codex_side import CodexState
from .hub import Face, Hub, RequestHandler

log = logging.getLogger(__name__)

#: Client messages kept while Codex is brought back; past this many, they are
#: answered at once with the reason Codex is away.
MAX_WAITING = 1000


class ClientState(enum.Enum):
    """How far the client's handshake is (see the module docstring)."""

    OPENING = "opening"
    OPEN = "open"


class Catalog(Protocol):
    """Asks Codex for its model catalog (:mod:`bridge.engine.features.settings.settings`)."""

    def ask_catalog(self) -> None: ...


class Registrar(Protocol):
    """Registers the machines the bridge reaches with a Codex that has just started
    (:mod:`bridge.engine.features.settings.machines`)."""

    def register(self) -> None: ...


class Recovery(Protocol):
    """Resumes every session on a Codex that was brought back."""

    def recover(self) -> None: ...


class Offers(Protocol):
    """A feature that fills what the bridge offers in ``initialize``'s answer."""

    def advertise(self, result: acp_types.InitializeResult) -> None: ...


#: A client method → its handler.
RequestTable: TypeAlias = dict[str, RequestHandler]


class Extensions(Protocol):
    """What a client turns on at ``initialize`` beyond ACP
    (:mod:`bridge.engine.features.extensions.extensions`)."""

    def offer(self, caps: Any, requests: RequestTable, session: Any = None) -> None: ...

    def withdraw(self, requests: dict[str, RequestHandler]) -> None: ...

    def advertised(self, meta: Any) -> Any: ...


class HandshakeFace(Face, Protocol):
    """The v2 face (:mod:`bridge.engine.faces.v2`), which also shapes v2's ``initialize``
    answer."""

    def initialize_result(self, info: acp_types.Implementation, auth_methods: Any) -> Any: ...


@dataclass(eq=False)
class Connection:
    """The states of one client's connection to one Codex (see the module docstring).

    What waited is handed back to the engine, in order, once Codex is ready or known to be
    away (:class:`~bridge.engine.core.news.ClientWaited`). ``catalog``
    is asked for Codex's models once Codex is ready, ``recovery`` resumes the sessions
    on a restarted Codex, and ``offers`` fill what ``initialize`` answers, with what
    the client turns on (``extensions``). A v1 client is spoken to through ``v1_face``
    (from the start) over the request table ``v1_requests``; a client that asks for v2
    is answered once the engine has built v2's face and request table
    (:class:`~bridge.engine.core.news.V2Chosen`, :meth:`speak_v2`). The faces are the
    wiring's to build: the core imports no face.
    """

    hub: Hub
    _: KW_ONLY
    catalog: Catalog
    recovery: Recovery
    #: The machines registered before any session is resumed or started.
    machines: Registrar
    #: What fills ``initialize``'s answer, in order: the session lifecycle, what else a
    #: session offers (status, title, archive), authentication (last: v2 asks it alone).
    offers: tuple[Offers, ...]
    extensions: Extensions
    #: The face a client is spoken to with until ``initialize`` says otherwise.
    v1_face: Face
    v1_requests: dict[str, RequestHandler]
    client: ClientState = field(default=ClientState.OPENING, init=False)
    #: Client messages waiting for Codex's handshake (or its return), in arrival order.
    _waiting: list[bytes] = field(default_factory=list, init=False)
    #: What Codex said it is at the handshake (its version is in it).
    codex_user_agent: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.hub.client.speak(self.v1_face)

    @property
    def codex(self) -> CodexState:
        """Where Codex's side is (kept on the hub: ``hub.codex.side``)."""
        return self.hub.codex.side.state

    @property
    def client_waiting(self) -> bool:
        """Client messages wait for Codex's handshake (or its return) to be handled."""
        return bool(self._waiting)

    @property
    def starting(self) -> bool:
        """Codex has neither finished a handshake nor been lost yet."""
        return self.codex in (CodexState.STARTING, CodexState.RESTARTING)

    # -- the client ------------------------------------------------------------------------

    def wait(self, data: bytes) -> bool:
        """Keep the client's message ``data`` until Codex is ready (``True``), or let it
        be handled now (``False``)."""
        waiting = self.starting or (
            self.codex is CodexState.RECOVERING and len(self._waiting) < MAX_WAITING
        )
        # initialize needs nothing from Codex: answered at once, unless something the
        # client sent before it still waits (the order of handling is kept).
        if waiting and (self._waiting or not _is_initialize(data)):
            self._waiting.append(data)
            return True
        return False

    def request(self, method: str) -> None:
        """The client sent a request (handled now): past ``initialize``, it is OPEN."""
        if method != "initialize":
            self.client = ClientState.OPEN

    def initialize(self, rid: RequestId, raw: Raw) -> None:
        """The client's ``initialize``: the ACP version is agreed (a v2 client gets the
        v2 face), and what the bridge offers is answered (it needs nothing from Codex)."""
        version = negotiation.negotiate(raw)
        if self.client is ClientState.OPEN and (version == 2 or self.hub.client.face.version == 2):
            # v2: initialize may be repeated only before any other request.
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "initialize may only be repeated before any other request",
            )
        if version == 2:
            self._initialize_v2(rid, raw)
            return
        params = decode_params(raw, acp_types.InitializeParams, "initialize")
        self.hub.client.speak(self.v1_face)  # the latest successful initialize decides
        extensions, client_meta = self.extensions, params.clientCapabilities.meta
        declared = self.hub.handshake.air = air.declared(client_meta)
        if declared is not None and air.NATIVE_SUBAGENTS in declared:
            # AIR's name for the subagents capability, which released SDKs can strip.
            params.clientCapabilities.subagents = params.clientCapabilities.subagents or {}
        self.hub.handshake.client_capabilities = params.clientCapabilities
        result = acp_types.InitializeResult(
            protocolVersion=acp_types.PROTOCOL_VERSION,
            agentCapabilities=acp_types.AgentCapabilities(
                promptCapabilities=acp_types.PromptCapabilities(image=True, embeddedContext=True),
            ),
            agentInfo=acp_types.Implementation(name=AGENT_NAME, title="Codex", version=__version__),
            meta=dict(acp_steering.SUPPORTED),
        )
        for offer in self.offers:
            offer.advertise(result)
        extensions.withdraw(self.v1_requests)  # the latest initialize decides
        extensions.offer(
            result.agentCapabilities, self.v1_requests, params.clientCapabilities.session
        )
        result.meta = extensions.advertised(result.meta)
        self.hub.client.answer(rid, result)

    def _initialize_v2(self, rid: RequestId, raw: Raw) -> None:
        """ACP v2: the same engine behind the v2 face (:mod:`bridge.engine.faces.v2`).

        v2 clients understand sub-agents without declaring it (the RFD), and have no
        file system or terminal of their own to lend (v2 has no ``fs/*``, ``terminal/*``).
        """
        # Here, not at the top: a v1 client's start never pays for importing v2.
        from ...acp import v2 as acp_v2

        params = decode_params(raw, acp_v2.InitializeParams, "initialize")
        hub = self.hub
        hub.handshake.client_capabilities = acp_types.ClientCapabilities(
            subagents={},
            elicitation=params.capabilities.elicitation,
            auth=params.capabilities.auth,
            # Compaction updates and notices are baseline updates in v2.
            session={"compaction": {}, "notices": {}},
        )
        # Its face and request table are the wiring's to build (a v1 client's start never
        # imports them): the engine hands them to :meth:`speak_v2`.
        hub.happened(news.V2Chosen(rid, params))

    def speak_v2(
        self, rid: RequestId, params: Any, face: HandshakeFace, requests: dict[str, RequestHandler]
    ) -> None:
        """A v2 client's ``initialize`` answered, spoken to through ``face`` over ``requests``
        from now on."""
        hub = self.hub
        auth = self.offers[-1]
        info = acp_types.Implementation(name=AGENT_NAME, title="Codex", version=__version__)
        result = acp_types.InitializeResult(
            protocolVersion=1, agentCapabilities=acp_types.AgentCapabilities()
        )
        auth.advertise(result)
        v2_result = face.initialize_result(info, result.authMethods)
        v2_result.meta = dict(acp_steering.SUPPORTED)
        extensions, client_meta = self.extensions, params.capabilities.meta
        hub.handshake.air = air.declared(client_meta)
        extensions.offer(v2_result.capabilities, requests, params.capabilities.session)
        v2_result.meta = extensions.advertised(v2_result.meta)
        hub.client.speak(face)
        hub.client.answer(rid, v2_result)

    # -- Codex's handshake -----------------------------------------------------------------

    def start(self) -> None:
        """Send Codex ``initialize`` (STARTING, or RESTARTING after :meth:`restarted`)."""
        params = codex_types.InitializeParams(
            clientInfo=codex_types.ClientInfo(name=AGENT_NAME, version=__version__),
            capabilities=codex_types.InitializeCapabilities(experimentalApi=True),
        )
        self.hub.codex.request("initialize", params, None, self._initialized, self._refused)

    def _initialized(self, result: object) -> None:
        """STARTING or RESTARTING → READY."""
        self._check_version(result)
        restarted = self.codex is CodexState.RESTARTING
        self.hub.codex.side.move(CodexState.READY)
        self.hub.codex.notify("initialized")
        self.machines.register()
        # While the client does its own handshake: the first session's answer lists the models.
        self.catalog.ask_catalog()
        if restarted:
            self.recovery.recover()
        self.drain()

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

    def _refused(self, error: ErrorObject) -> None:
        """``initialize`` failed: Codex refused it (→ LOST), or Codex was lost during it
        (RECOVERING stays: keep waiting; else LOST with the loss's reason)."""
        hub = self.hub
        if self.codex is CodexState.RECOVERING:
            return
        reason = hub.codex.lost_reason or f"Codex app-server refused initialize: {error.message}"
        hub.codex.side.move(CodexState.LOST, reason)
        self.drain()

    # -- Codex lost and brought back -------------------------------------------------------

    def lost(self, reason: str, *, retrying: bool) -> bool:
        """Codex is gone: → RECOVERING (``retrying``) or LOST. ``False`` when it was already
        known to be gone (nothing changes)."""
        hub = self.hub
        if hub.codex.lost_reason is not None:
            return False
        hub.codex.side.move(CodexState.RECOVERING if retrying else CodexState.LOST, reason)
        hub.codex.requests_void()
        return True

    def restarted(self) -> None:
        """A new connection to Codex is open: → RESTARTING, and its handshake begins."""
        self.hub.codex.reset()
        self.hub.codex.side.move(CodexState.RESTARTING)
        self.start()

    def gave_up(self, reason: str) -> None:
        """The shell stopped bringing Codex back: → LOST with ``reason``."""
        self.hub.codex.side.move(CodexState.LOST, reason)

    def drain(self) -> None:
        """The client messages that waited are handled now, in order (by the engine, once
        what drains them returns)."""
        waiting, self._waiting = self._waiting, []
        if waiting:
            self.hub.happened(news.ClientWaited(tuple(waiting)))


class _UserAgent(msgspec.Struct):
    userAgent: str = ""


_USER_AGENT = msgspec.json.Decoder(_UserAgent)


class _MethodPeek(msgspec.Struct):
    method: object = None


_METHOD_PEEK = msgspec.json.Decoder(_MethodPeek)


def _is_initialize(data: bytes) -> bool:
    """``data`` is the client's ``initialize``: its answer needs nothing from Codex, so
    it never waits for Codex's handshake (only read while Codex is not ready)."""
    try:
        return _METHOD_PEEK.decode(data).method == "initialize"
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return False  # handled, and answered, in its turn
