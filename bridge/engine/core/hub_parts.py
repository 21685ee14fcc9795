"""The hub's parts, each with one writer: what the shell fixed at start, and what the client's
``initialize`` settled.

:class:`Setup` is made once, with the hub, and never written (frozen): the options the shell
started the engine with. :class:`Handshake` is written by :mod:`bridge.engine.core.connection`
alone, as each ``initialize`` is answered (the latest one decides), and read by every feature.
The hub's other fields say who writes them (``tests/test_architecture.py``'s ``HUB_WRITERS``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...acp import types as acp_types


def nothing_stored(_thread_id: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Setup:
    """What the shell started the engine with (see :class:`~bridge.engine.core.hub.Hub`)."""

    #: What every thread is started (or opened) with without a profile.
    base_config: dict[str, Any] | None = None
    #: Codex's config profiles, each as the ``config`` a thread gets with it in force.
    profiles: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    #: An OpenAI API key from the bridge's environment, for ``authenticate`` to hand to Codex.
    api_key: str | None = None
    #: Whether a path is an existing directory (the shell's file system, or as recorded).
    is_directory: Callable[[str], bool] = lambda _path: True
    #: A path with its symlinks resolved (the path itself where there is none to resolve).
    real_path: Callable[[str], str] = str
    #: The stored work is read in pages: ``session/list`` from Codex's index
    #: (``useStateDbOnly``, a page of ``limit``), a loaded history (and its sub-agents') by
    #: ``thread/items/list`` pages replayed as each arrives. Off, the whole history comes with
    #: one ``thread/read`` (what recordings made before paging hold).
    paged_store: bool = False
    #: Other clients may hear this Codex's requests (a daemon's, or one attached by URL): a
    #: turn another client started is theirs to answer. Else the only other starter of a turn
    #: is Codex itself (a goal's), and nobody but this client can answer it.
    codex_shared: bool = False
    #: The machine the shell stored for a thread (``MachineChosen``), if any.
    stored_machine: Callable[[str], str | None] = nothing_stored


@dataclass(slots=True)
class Handshake:
    """What the client's ``initialize`` settled."""

    client_capabilities: acp_types.ClientCapabilities = field(
        default_factory=acp_types.ClientCapabilities
    )
    #: JetBrains AIR's capabilities the client declared (``None``: not AIR).
    air: frozenset[str] | None = None
