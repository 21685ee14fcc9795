"""Replaying a recording through the engine: no Codex, no network, no clock.

The recorded inputs (what the client sent, what Codex sent, Codex being lost)
are fed to a fresh :class:`~bridge.engine.Engine` in their recorded order. The
engine's requests to Codex are compared with the recorded ones as they come
(request ids are allocated deterministically, so they match); a difference
means the engine no longer behaves as it did when the recording was made, and
Codex's recorded answers would no longer fit, so the replay stops there with
the line and both messages. What the engine sends the client is the
transcript.

Known Codex methods are checked too: a message Codex never sends (per the
0.169 and 0.171 schemas) is an error naming the line, never silently skipped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..codex.messages import RETIRED_REQUESTS
from ..codex.methods import SERVER_NOTIFICATIONS, SERVER_REQUESTS
from ..engine import (
    Effect,
    Engine,
    MachineCall,
    MachineChosen,
    MachineOffer,
    MachineReleased,
    MachineWanted,
    ReadClock,
    Registration,
    ToClient,
)
from ..shell.effects import answer_of
from .checker import TranscriptChecker, Violation
from .format import EventRecord, MessageRecord, Recording, RecordingError
from .redact import REDACTED, Redactor


@dataclass
class Transcript:
    """What a replay produced: the ACP messages the bridge sent, normalized, in order."""

    lines: list[str] = field(default_factory=list)
    #: Every message, both directions, as the checker saw them: ("client"|"agent", message).
    conversation: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def normalize(message: Any) -> str:
    """One stable line for an ACP message: keys sorted, compact.

    Nothing the bridge sends today varies between runs (ids are Codex's thread
    ids and the peer's counters, both reproduced by the replay); when a field
    that does vary appears (a timestamp), it is dropped here.
    """
    # msgspec's sorted encoding is byte-for-byte json.dumps(sort_keys=True,
    # separators=(",", ":"), ensure_ascii=False), several times faster.
    return _sorted_encoder.encode(message).decode()


_sorted_encoder = msgspec.json.Encoder(order="sorted")


def replay(recording: Recording, *, check: bool = True) -> Transcript:
    """Run ``recording`` through the engine; raise ``RecordingError`` naming the line on trouble.

    With ``check``, the RFD invariants checker follows the conversation and a
    violation is an error too (the first violating transcript line, and why).
    """
    header = recording.header
    thread_config = header.engine.get("threadConfig") if header.engine else None
    # The paths the live bridge found were no directory; every other one was.
    missing = {
        e.record.reason
        for e in recording.entries
        if isinstance(e.record, EventRecord) and e.record.event == "missing_directory"
    }
    stored = {
        e.record.reason: e.record.machine
        for e in recording.entries
        if isinstance(e.record, EventRecord) and e.record.event == "stored_machine"
    }
    # Where the live bridge found a path really led; every other one led where it said.
    resolved = {
        e.record.reason: e.record.data
        for e in recording.entries
        if isinstance(e.record, EventRecord) and e.record.event == "real_path"
    }
    engine = Engine(
        thread_config=thread_config,
        is_directory=lambda path: path not in missing,
        real_path=lambda path: resolved.get(path, path),
        stored_machine=stored.get,
        **engine_options(recording),
    )
    capabilities = header.clientCapabilities or {}
    checker = (
        TranscriptChecker(subagents=capabilities.get("subagents") is not None) if check else None
    )
    transcript = Transcript()
    sent_codex: deque[tuple[bytes, Any]] = deque()
    redactor = Redactor()

    #: The engine's clock reads the shell has not answered yet, oldest first.
    clock_reads: deque[Any] = deque()

    def apply(effects: list[Effect], line: int) -> None:
        for effect in effects:
            if isinstance(effect, ReadClock):
                clock_reads.append(effect.request_id)
            elif isinstance(effect, ToClient):
                message = msgspec.json.decode(effect.data)
                transcript.lines.append(normalize(message))
                transcript.conversation.append(("agent", message))
                if checker is not None:
                    try:
                        checker.agent(message, len(transcript.lines))
                    except Violation as exc:
                        raise RecordingError(
                            recording.path, line, f"transcript line {exc.line}: {exc.why}"
                        ) from None
            elif isinstance(effect, MachineWanted | MachineChosen | MachineCall | MachineReleased):
                pass  # the shell's to carry out; the recording holds what it said next
            else:
                sent = msgspec.json.decode(effect.data)
                sent_codex.append((effect.data, redactor.value(sent)))

    apply(engine.start(), 0)
    for entry in recording.entries:
        record = entry.record
        if isinstance(record, EventRecord):
            if record.event == "codex_lost":
                reason = record.reason or "Codex was lost"
                apply(engine.codex_lost(reason, retrying=record.retrying), entry.line)
            elif record.event == "codex_restarted":
                apply(engine.codex_restarted(), entry.line)
            elif record.event == "codex_gave_up":
                apply(engine.codex_gave_up(record.reason or "Codex is gone"), entry.line)
            elif record.event == "client_lost":
                apply(engine.client_lost(), entry.line)
            elif record.event == "clock_read":
                if not clock_reads:
                    raise RecordingError(
                        recording.path, entry.line, "a clock read the engine did not ask for"
                    )
                apply(engine.clock_read(clock_reads.popleft(), record.seconds), entry.line)
            elif record.event == "machine_changed":
                apply(
                    engine.machine_changed(record.machine, record.state, record.reason),
                    entry.line,
                )
            elif record.event == "machine_answered":
                try:
                    key, (result, code, message) = answer_of(record.data)
                except (msgspec.DecodeError, KeyError, TypeError, ValueError):
                    raise RecordingError(
                        recording.path, entry.line, "a machine's answer that cannot be read"
                    ) from None
                apply(engine.machine_answered(key, result, code, message), entry.line)
            elif record.event in ("missing_directory", "stored_machine", "real_path"):
                pass  # answered when the engine asks (see above)
            else:
                raise RecordingError(recording.path, entry.line, f"unknown event {record.event!r}")
            continue
        assert isinstance(record, MessageRecord)
        data = record.data()
        if record.dir == "to_codex":
            _expect_sent(recording.path, entry.line, sent_codex, data)
        elif record.dir == "from_client":
            if checker is not None and record.message is not msgspec.UNSET:
                message = msgspec.json.decode(data)
                transcript.conversation.append(("client", message))
                try:
                    checker.client(message, len(transcript.lines))
                except Violation as exc:
                    raise RecordingError(recording.path, entry.line, exc.why) from None
            apply(engine.receive_client(data), entry.line)
        else:
            _check_codex_message(recording.path, entry.line, data)
            apply(engine.receive_codex(data), entry.line)
    if sent_codex:
        raw, _ = sent_codex[0]
        raise RecordingError(
            recording.path,
            recording.entries[-1].line if recording.entries else 0,
            f"the engine sent Codex a message the recording does not have: {raw.decode()}",
        )
    return transcript


def engine_options(recording: Recording) -> dict[str, Any]:
    """The engine's options the live bridge ran with, as its header says: ``detachable``
    and ``paged_store`` (a recording made before paging says nothing of it: its Codex
    requests are whole-history reads, and its replay makes them again)."""
    options = recording.header.engine or {}
    return {
        "detachable": bool(options.get("detachable")),
        "paged_store": bool(options.get("pagedStore")),
        "codex_shared": bool(options.get("codexShared")),
        # Codex's config profiles, each as the thread config sent with it in force.
        "profiles": options.get("profiles") or {},
        "profile": options.get("profile"),
        "machines": [
            MachineOffer(
                name=m["name"],
                path=m.get("path", ""),
                description=m.get("description", ""),
                # The token is redacted in the recording, as in what it holds of the
                # engine's environment/add: the replay sends the same.
                registration=Registration(m["url"], REDACTED) if m.get("url") else None,
                per_session=bool(m.get("perSession")),
            )
            for m in options.get("machines", [])
        ],
    }


def _expect_sent(path: str, line: int, sent: deque[tuple[bytes, Any]], recorded: bytes) -> None:
    expected = msgspec.json.decode(recorded)
    if not sent:
        raise RecordingError(
            path,
            line,
            f"the recording has the bridge send Codex {recorded.decode()}, the engine sent nothing",
        )
    raw, actual = sent.popleft()
    if actual != expected:
        raise RecordingError(
            path,
            line,
            "the engine now sends Codex something else (re-record this fixture):\n"
            f"  recorded: {recorded.decode()}\n  engine:   {raw.decode()}",
        )


def _check_codex_message(path: str, line: int, data: bytes) -> None:
    try:
        message = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise RecordingError(path, line, f"a Codex message that is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise RecordingError(path, line, "a Codex message that is not a JSON object")
    method = message.get("method")
    if method is None:
        if "id" not in message or ("result" not in message and "error" not in message):
            raise RecordingError(
                path, line, "a Codex message that is neither a response nor a call"
            )
        return
    known = SERVER_REQUESTS | RETIRED_REQUESTS if "id" in message else SERVER_NOTIFICATIONS
    if method not in known:
        kind = "request" if "id" in message else "notification"
        raise RecordingError(
            path,
            line,
            f"Codex 0.169 to 0.171 never sends the {kind} {method!r}: hand-edited or corrupt recording?",
        )
