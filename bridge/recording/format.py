"""The recording format: JSON Lines, a header first, an end record last.

See ``docs/recordings.md`` for the full description. In short::

    {"kind":"header","format":"codex-acp-bridge/recording","version":1, ...}
    {"kind":"message","t":0.012,"dir":"from_client","message":{...}}
    {"kind":"message","t":0.013,"dir":"to_codex","message":{...}}
    {"kind":"message","t":0.020,"dir":"from_codex","message":{...}}
    {"kind":"event","t":9.5,"event":"codex_lost","reason":"..."}
    {"kind":"end","t":10.0,"messages":1234}

``dir`` is seen from the bridge: what the client sent it (``from_client``),
what it sent Codex (``to_codex``), what Codex sent it (``from_codex``). What
the bridge sent the client is *not* recorded: it is what a replay computes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

FORMAT = "codex-acp-bridge/recording"
VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})

Direction = Literal["from_client", "to_codex", "from_codex"]
DIRECTIONS: frozenset[str] = frozenset({"from_client", "to_codex", "from_codex"})


class Header(msgspec.Struct, kw_only=True, omit_defaults=True, tag="header", tag_field="kind"):
    format: str
    version: int
    bridge: str = ""
    #: Codex's version, from its ``initialize`` answer (``userAgent``).
    codex: str = ""
    codexUserAgent: str = ""
    transport: str = ""
    clientInfo: dict[str, Any] | None = None
    clientCapabilities: dict[str, Any] | None = None
    #: The ACP version ``initialize`` settled on (1 for recordings made before v2).
    acpVersion: int = 1
    #: What the engine was configured with (e.g. ``threadConfig`` from ``-c``).
    engine: dict[str, Any] = msgspec.field(default_factory=dict)
    redaction: str = ""
    #: True when a person wrote or edited the Codex traffic (an ordering the
    #: real Codex rarely produces); such a file says why in ``note``.
    synthetic: bool = False
    note: str | UnsetType = UNSET


class MessageRecord(
    msgspec.Struct, kw_only=True, omit_defaults=True, tag="message", tag_field="kind"
):
    t: float
    dir: str
    #: The message as JSON; or, for bytes that were not JSON (a client's
    #: malformed line), ``text`` holds them as a string instead.
    message: msgspec.Raw | UnsetType = UNSET
    text: str | UnsetType = UNSET

    def data(self) -> bytes:
        if self.message is not UNSET:
            return bytes(self.message)
        return self.text.encode() if isinstance(self.text, str) else b""


class EventRecord(msgspec.Struct, kw_only=True, omit_defaults=True, tag="event", tag_field="kind"):
    t: float
    event: str
    reason: str = ""
    #: ``codex_lost``: the shell is bringing Codex back (client messages wait).
    retrying: bool = False
    #: ``clock_read``: the wall clock the shell read, in whole Unix seconds.
    seconds: int = 0
    #: ``machine_changed``: which machine's link, and its state (``reason`` says why).
    machine: str = ""
    state: str = ""
    #: ``machine_answered``: the shell's answer to the engine's call to that machine's
    #: exec-server, JSON: ``{"key", "result"}`` or ``{"key", "error": {code, message}}``.
    #: ``real_path``: where the path in ``reason`` really led (its symlinks resolved).
    data: str = ""


class EndRecord(msgspec.Struct, kw_only=True, tag="end", tag_field="kind"):
    t: float
    messages: int


Record = Header | MessageRecord | EventRecord | EndRecord
_record_decoder = msgspec.json.Decoder(Record)


class RecordingError(Exception):
    """A recording that cannot be replayed; ``line`` is 1-based (0: the file as a whole)."""

    def __init__(self, path: str, line: int, message: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.reason = path, line, message


@dataclass(frozen=True, slots=True)
class Entry:
    """One record after the header, with the line it came from."""

    line: int
    record: MessageRecord | EventRecord


@dataclass(frozen=True, slots=True)
class Recording:
    path: str
    header: Header
    entries: tuple[Entry, ...]
    end: EndRecord


def read_recording(path: str | Path) -> Recording:
    """Read and check a whole recording, or raise :class:`RecordingError` naming the line."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RecordingError(name, 0, f"cannot read: {exc.strerror}") from exc
    return parse_recording(data, name)


def parse_recording(data: bytes, name: str = "<recording>") -> Recording:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        raise RecordingError(
            name, len(lines), "the last line is not terminated: the recording is truncated"
        )
    if not lines:
        raise RecordingError(name, 0, "empty file: not a recording")
    records = list(_decode_lines(lines, name))
    header = records[0][1]
    if not isinstance(header, Header):
        raise RecordingError(name, 1, "the first line is not a recording header")
    if header.format != FORMAT:
        raise RecordingError(name, 1, f"unknown format {header.format!r} (expected {FORMAT!r})")
    if header.version not in SUPPORTED_VERSIONS:
        raise RecordingError(
            name,
            1,
            f"recording format version {header.version} is not supported by this bridge "
            f"(it reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))}); "
            "use a matching codex-acp-bridge or re-record",
        )
    entries: list[Entry] = []
    end: EndRecord | None = None
    for line_no, record in records[1:]:
        if end is not None:
            raise RecordingError(name, line_no, "record after the end record")
        if isinstance(record, Header):
            raise RecordingError(name, line_no, "a second header")
        if isinstance(record, EndRecord):
            end = record
            continue
        if isinstance(record, MessageRecord):
            if record.dir not in DIRECTIONS:
                raise RecordingError(
                    name,
                    line_no,
                    f"unknown direction {record.dir!r} (expected one of {sorted(DIRECTIONS)})",
                )
            if (record.message is UNSET) == (record.text is UNSET):
                raise RecordingError(
                    name, line_no, "a message record needs exactly one of message, text"
                )
        entries.append(Entry(line_no, record))
    if end is None:
        raise RecordingError(
            name,
            len(lines),
            "no end record: the recording is truncated (the bridge stopped mid-way)",
        )
    messages = sum(1 for e in entries if isinstance(e.record, MessageRecord))
    if end.messages != messages:
        raise RecordingError(
            name,
            len(lines),
            f"the end record counts {end.messages} messages, the file has {messages}",
        )
    return Recording(name, header, tuple(entries), end)


def _decode_lines(lines: list[bytes], name: str) -> Iterator[tuple[int, Record]]:
    for index, line in enumerate(lines, start=1):
        try:
            yield index, _record_decoder.decode(line)
        except msgspec.DecodeError as exc:
            what = "not JSON" if _not_json(line) else "not a recording record"
            raise RecordingError(name, index, f"{what}: {exc}") from None


def _not_json(line: bytes) -> bool:
    try:
        msgspec.json.decode(line)
    except msgspec.DecodeError:
        return True
    return False


_encoder = msgspec.json.Encoder()


def encode_record(record: Record) -> bytes:
    return _encoder.encode(record) + b"\n"
