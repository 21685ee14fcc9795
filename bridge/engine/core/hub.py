"""What every feature shares: the threads, and the hub's parts.

The :class:`Hub` is handed to each feature when the engine is wired
(:mod:`bridge.engine.engine`). It knows no feature, and holds:

- the threads (:attr:`Hub.threads`);
- what the shell fixed at start (``hub.setup``) and what ``initialize`` settled
  (``hub.handshake``), in :mod:`.hub_parts`;
- the client side, ``hub.client`` (:mod:`.client_link`): updates, facts and answers, through
  the face ``initialize`` chose;
- the Codex side, ``hub.codex`` (:mod:`.codex_link`): requests to Codex and their answers,
  and Codex's connection state;
- the profile and the machines a session may act on, each its feature's to write;
- what the features tell the engine (:meth:`Hub.happened`), and the one ordered list of
  effects both sides write to (:meth:`Hub.take`).

Two promises are kept by the two sides, for every feature at once:

- a request to Codex names the type of its result; an answer that does not
  decode into it reaches the caller as an error naming Codex's malformed
  answer (so the client request waiting on it fails cleanly), never as an
  exception;
- every request, from either side, is answered at most once: an answer for a
  request already answered (or never received) is logged and not sent.

Two ways to ask Codex. A request whose answer changes a thread's record (a turn
started, interrupted or steered, a session resumed after Codex came back, a thread
read to place a sub-agent) goes through :meth:`CodexLink.ask <.codex_link.CodexLink.ask>`:
it is a typed entry on the record (:data:`~bridge.engine.core.threads.CodexAsk`) while
Codex has not answered, the answer goes to a method of the feature with the record and
the entry, and it is stale once the entry was withdrawn (its turn ended, its record
forgotten): the entry carries what the answer needs, no closure holds the state. A
request whose answer only answers a client, or feeds a feature's own state, is a step of
an exchange (:mod:`bridge.engine.core.exchanges`, over :meth:`CodexLink.request
<.codex_link.CodexLink.request>`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from . import effects
from .client_link import ClientLink
from .client_link import Face as Face
from .client_link import RequestHandler as RequestHandler
from .codex_asks import CodexAsk
from .codex_link import CodexLink
from .hub_parts import Handshake, Setup, nothing_stored
from .machines import Machine
from .news import News
from .threads import Threads

log = logging.getLogger(__name__)

E = TypeVar("E", bound=CodexAsk)


class StoredSessionParams(Protocol):
    """What a request that opens a stored session says of it, whichever ACP version
    decoded it (v1's load, resume and fork; v2's resume and fork)."""

    @property
    def sessionId(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def mcpServers(self) -> Sequence[dict[str, Any]] | None: ...

    @property
    def additionalDirectories(self) -> Sequence[str] | None: ...


class Hub:
    """What every feature shares (see the module docstring).

    ``thread_config`` is sent as ``config`` in every ``thread/start`` (the
    ``-c key=value`` overrides, for a Codex the bridge did not start itself) while no
    profile is in force; ``profiles`` is the ``config`` to send instead with each
    profile in force (by name: the profile layered, the overrides over it), and
    ``profile`` the one in force at first (``None``: none).
    ``api_key`` is an OpenAI API key from the bridge's environment, for the
    ``authenticate`` method that hands it to Codex (the engine reads no
    environment itself). ``is_directory`` answers whether a path is an
    existing directory: the shell passes the file system's answer in, the
    replay the recorded one. ``real_path`` is a path with its symlinks resolved, as the
    shell's file system has them (the path itself where it has none to resolve), or as
    recorded.
    """

    def __init__(
        self,
        *,
        thread_config: dict[str, Any] | None,
        api_key: str | None,
        profiles: Mapping[str, dict[str, Any]] | None = None,
        profile: str | None = None,
        is_directory: Callable[[str], bool],
        real_path: Callable[[str], str] = str,
        paged_store: bool = False,
        codex_shared: bool = False,
        stored_machine: Callable[[str], str | None] | None = None,
    ) -> None:
        #: The effects produced since the last :meth:`take`, both sides', in order.
        self._out: list[effects.Effect] = []
        self.threads = Threads()
        #: The client's side: what goes to the client, through its face.
        self.client = ClientLink(self._out, self.threads)
        #: What the shell fixed at start: never written (see :mod:`.hub_parts`).
        self.setup = Setup(
            base_config=thread_config or None,
            profiles=dict(profiles or {}),
            api_key=api_key or None,
            is_directory=is_directory,
            real_path=real_path,
            paged_store=paged_store,
            codex_shared=codex_shared,
            stored_machine=stored_machine or nothing_stored,
        )
        #: What the client's ``initialize`` settled: core/connection.py writes it.
        self.handshake = Handshake()
        #: Codex's side: what goes to Codex and comes back, and its connection's state.
        self.codex = CodexLink(self._out)
        #: The profile new threads get (the ``profile`` option's), ``None``: none. The
        #: settings feature's to change.
        self.profile = profile if profile in self.setup.profiles else None
        #: The machines a session may act on, by name (the machines feature's; empty:
        #: none named, and no ``machine`` option is offered).
        self.machines: dict[str, Machine] = {}
        #: What the features said happened, for the engine to follow (:mod:`.news`): one
        #: list for the connection's life (the engine tests it for every Codex message).
        self.news: list[News] = []

    @property
    def thread_config(self) -> dict[str, Any] | None:
        """The ``config`` of the threads started or opened now: the profile's, else the
        overrides (``None``: nothing to send)."""
        if self.profile is not None:
            return self.setup.profiles[self.profile] or None
        return self.setup.base_config

    def declares(self, capability: str) -> bool:
        """The client declared AIR's ``capability`` at ``initialize``."""
        air = self.handshake.air
        return air is not None and capability in air

    @property
    def subagents_exposed(self) -> bool:
        """The client declared ``subagents``: sub-agents are shown as sessions."""
        return self.handshake.client_capabilities.subagents is not None

    @property
    def speaks_unstable(self) -> bool:
        """The client speaks ACP's unstable schema, so the agent capabilities only that
        schema has (``providers``, ``sessionCapabilities.fork``) are advertised to it.

        A client says nothing of which schema it was written to; the sign is a client
        capability only the unstable schema has, the one the bridge reads:
        ``subagents``. Every v2 client counts (v2 clients take sub-agents without
        declaring them). A client that is not told may still call the methods.
        """
        return self.subagents_exposed

    def effect(
        self, asked: effects.MachineWanted | effects.MachineChosen | effects.MachineReleased
    ) -> None:
        """Ask the shell to reach a machine, to store the one a thread was given, or to
        remove a session's own place."""
        self._out.append(asked)

    # -- bookkeeping ------------------------------------------------------------------

    def happened(self, news: News) -> None:
        """Tell the engine what happened (:mod:`bridge.engine.core.news`): it decides what
        follows, once the feature saying it returns."""
        self.news.append(news)

    def take_news(self) -> list[News]:
        """What the features said happened since the last call, in order (the engine's)."""
        taken = self.news[:]
        self.news.clear()
        return taken

    def take(self) -> list[effects.Effect]:
        """The effects produced since the last call, in order."""
        out = self._out[:]
        self._out.clear()
        return out
