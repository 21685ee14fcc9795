"""Carrying out what the engine asks, in its order: the one dispatch of the shell, used
before trio runs (:mod:`bridge.shell.early`) and by the trio shell alike
(:mod:`bridge.shell.run_bridge`). No trio here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from ..engine import Effect, Engine, MachineChosen, MachineWanted, ReadClock, ToClient, ToCodex

log = logging.getLogger(__name__)


class Tap(Protocol):
    """Sees everything the engine is fed and sends, in the engine's order (recordings)."""

    def message(self, direction: str, data: bytes) -> None:
        """``direction``: ``from_client``, ``to_client``, ``from_codex`` or ``to_codex``."""

    def event(
        self,
        name: str,
        reason: str = "",
        *,
        retrying: bool = False,
        seconds: int = 0,
        machine: str = "",
        state: str = "",
    ) -> None:
        """Something the shell observed and told the engine (``codex_lost``, ...;
        ``clock_read`` with the ``seconds`` it read; ``machine_changed`` with the
        ``machine`` and its ``state``)."""


def carry_out(
    effects: Iterable[Effect],
    engine: Engine,
    tap: Tap | None,
    to_client: Callable[[ToClient], None],
    to_codex: Callable[[ToCodex], None] | None,
    want_machine: Callable[[str], None] | None = None,
    store_machine: Callable[[str, str], None] | None = None,
) -> None:
    """Send each message to its side (``to_codex`` ``None``: no Codex connection now, so
    what is meant for it is dropped), answer each clock reading and hand each machine a
    prompt wants to ``want_machine`` (the links) and each pick to ``store_machine``, in order; ``tap`` sees each as it goes."""
    for effect in effects:
        if isinstance(effect, ToClient):
            if tap:
                tap.message("to_client", effect.data)
            to_client(effect)
        elif isinstance(effect, ToCodex):
            if to_codex is None:
                log.debug("no Codex connection; dropping %s", effect.data[:80])
                continue
            if tap:
                tap.message("to_codex", effect.data)
            to_codex(effect)
        elif isinstance(effect, ReadClock):
            seconds = int(time.time())
            if tap:
                tap.event("clock_read", seconds=seconds)
            carry_out(
                engine.clock_read(effect.request_id, seconds),
                engine,
                tap,
                to_client,
                to_codex,
                want_machine,
                store_machine,
            )
        elif isinstance(effect, MachineChosen):
            if store_machine is not None:
                store_machine(effect.thread_id, effect.machine)
        elif isinstance(effect, MachineWanted):
            if want_machine is not None:
                want_machine(effect.name)
                continue
            reason = "this bridge runs no link to it"
            if tap:
                tap.event("machine_changed", reason, machine=effect.name, state="down")
            carry_out(
                engine.machine_changed(effect.name, "down", reason),
                engine,
                tap,
                to_client,
                to_codex,
                want_machine,
                store_machine,
            )
