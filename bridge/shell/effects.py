"""Carrying out what the engine asks, in its order: the one dispatch of the shell, used
before trio runs (:mod:`bridge.shell.early`) and by the trio shell alike
(:mod:`bridge.shell.run_bridge`). No trio here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypedDict, Unpack

import msgspec

from ..engine import (
    Effect,
    Engine,
    MachineCall,
    MachineChosen,
    MachineReleased,
    MachineWanted,
    ReadClock,
    ToClient,
    ToCodex,
)

log = logging.getLogger(__name__)


class Tap(Protocol):
    """Sees everything the engine is fed and sends, in the engine's order (recordings)."""

    def message(self, direction: str, data: bytes) -> None:
        """``direction``: ``from_client``, ``to_client``, ``from_codex`` or ``to_codex``."""

    def event(self, name: str, reason: str = "", **facts: Unpack[EventFacts]) -> None:
        """Something the shell observed and told the engine (``codex_lost``, ...), with
        what it says besides its ``reason``."""


class EventFacts(TypedDict, total=False):
    """What an event of a :class:`Tap` says besides its name and reason (a recording keeps
    them: :class:`bridge.recording.format.EventRecord`); each absent where it says nothing."""

    #: ``codex_lost``: the shell is bringing Codex back.
    retrying: bool
    #: ``clock_read``: the wall clock it read, in whole Unix seconds.
    seconds: int
    #: ``machine_changed``: the machine and its state; ``machine_answered``: the machine.
    machine: str
    state: str
    #: ``machine_answered``: the answer (:func:`answer_data`); ``real_path``: where it led.
    data: str


#: The shell's answer to a :class:`MachineCall`: its result (JSON), else ``(code, message)``.
MachineAnswer = tuple[bytes | None, int, str]
#: Carries a machine call out (the shell hands its answer to :func:`machine_answered`).
CallMachine = Callable[[MachineCall], None]


def answer_data(key: str, answer: MachineAnswer) -> str:
    """A machine's answer as a recording keeps it (``machine_answered``'s ``data``)."""
    result, code, message = answer
    if result is not None:
        return msgspec.json.encode({"key": key, "result": msgspec.Raw(result)}).decode()
    error = {"key": key, "error": {"code": code, "message": message}}
    return msgspec.json.encode(error).decode()


def answer_of(data: str) -> tuple[str, MachineAnswer]:
    """:func:`answer_data` read back: the call's key and its answer."""
    decoded = msgspec.json.decode(data)
    if "error" in decoded:
        error = decoded["error"]
        return decoded["key"], (None, int(error["code"]), str(error["message"]))
    return decoded["key"], (msgspec.json.encode(decoded["result"]), 0, "")


def machine_answered(
    engine: Engine, tap: Tap | None, call: MachineCall, answer: MachineAnswer
) -> list[Effect]:
    """Hand ``answer`` to the engine (``tap`` sees it first)."""
    if tap:
        tap.event("machine_answered", machine=call.machine, data=answer_data(call.key, answer))
    result, code, message = answer
    return engine.machine_answered(call.key, result, code, message)


def carry_out(
    effects: Iterable[Effect],
    engine: Engine,
    tap: Tap | None,
    to_client: Callable[[ToClient], None],
    to_codex: Callable[[ToCodex], None] | None,
    want_machine: Callable[[str, tuple[str, ...]], None] | None = None,
    store_machine: Callable[[str, str], None] | None = None,
    call_machine: CallMachine | None = None,
    release_machine: Callable[[str], None] | None = None,
) -> None:
    """Send each message to its side (``to_codex`` ``None``: no Codex connection now, so
    what is meant for it is dropped), answer each clock reading and hand each machine a
    prompt wants to ``want_machine`` (the links), each pick to ``store_machine`` and each
    call to a machine's exec-server to ``call_machine`` (``None``: answered at once, with
    an error: no link here), and each session's own place that goes to
    ``release_machine``, in order; ``tap`` sees each as it goes."""

    def again(more: Iterable[Effect]) -> None:
        carry_out(
            more,
            engine,
            tap,
            to_client,
            to_codex,
            want_machine,
            store_machine,
            call_machine,
            release_machine,
        )

    for effect in effects:
        if isinstance(effect, ToClient):
            if tap:
                tap.message("to_client", effect.data)
            to_client(effect)
        elif isinstance(effect, ToCodex):
            if to_codex is None:
                log.debug("no Codex connection; dropping %s", _named(effect.data))
                continue
            if tap:
                tap.message("to_codex", effect.data)
            to_codex(effect)
        elif isinstance(effect, ReadClock):
            seconds = int(time.time())
            if tap:
                tap.event("clock_read", seconds=seconds)
            again(engine.clock_read(effect.request_id, seconds))
        elif isinstance(effect, MachineChosen):
            if store_machine is not None:
                store_machine(effect.thread_id, effect.machine)
        elif isinstance(effect, MachineWanted):
            if want_machine is not None:
                want_machine(effect.name, effect.folders)
                continue
            reason = "this bridge runs no link to it"
            if tap:
                tap.event("machine_changed", reason, machine=effect.name, state="down")
            again(engine.machine_changed(effect.name, "down", reason))
        elif isinstance(effect, MachineReleased):
            if release_machine is not None:
                release_machine(effect.name)
        elif isinstance(effect, MachineCall):
            if call_machine is not None:
                call_machine(effect)
                continue
            why = f"this bridge runs no link to the machine {effect.machine}"
            again(machine_answered(engine, tap, effect, (None, -32603, why)))


class _Envelope(msgspec.Struct):
    method: str = ""
    id: int | str | None = None


def _named(data: bytes) -> str:
    """A message to Codex as a log names it: its method and id, never its params (an
    ``account/login/start`` holds the API key)."""
    try:
        envelope = msgspec.json.decode(data, type=_Envelope)
    except msgspec.DecodeError:
        return f"a message of {len(data)} bytes"
    if envelope.id is None:
        return envelope.method or "an answer"
    return f"{envelope.method or 'the answer'} (id {envelope.id})"
