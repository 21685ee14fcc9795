"""Writing a recording while the bridge serves (the ``record`` command).

:class:`Recorder` is the ``tap`` of :func:`bridge.shell.run_bridge.run_bridge`: it
sees every message the engine is fed or sends Codex, in the engine's order,
and writes it redacted. The header needs two facts that only arrive with the
first messages (the client's capabilities from its ``initialize``, Codex's
version from its ``initialize`` answer), so records are held back until both
are known, or until too many have piled up, then written after the header.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any, BinaryIO, Unpack

import msgspec

from .. import __version__
from ..acp.negotiation import negotiate
from ..jsonrpc import RpcError
from ..shell.effects import EventFacts
from .format import FORMAT, VERSION, EndRecord, EventRecord, Header, MessageRecord, encode_record
from .redact import DESCRIPTION, Redactor

_HOLD_AT_MOST = 10_000
_VERSION_IN_AGENT = re.compile(r"/(\d+\.\d+\.\d+[^\s;)]*)")


class Recorder:
    def __init__(
        self,
        out: BinaryIO,
        *,
        clock: Callable[[], float],
        transport: str,
        engine_config: dict[str, Any] | None = None,
    ) -> None:
        self._out = out
        self._clock = clock
        self._start = clock()
        self._redactor = Redactor()
        self._held: list[bytes] | None = []
        self._messages = 0
        self.header = Header(
            format=FORMAT,
            version=VERSION,
            bridge=__version__,
            transport=transport,
            # A profile or an override may hold a secret (a provider's header): the engine's
            # config is redacted as the messages are (its replay then sends the same).
            engine=self._redactor.value(engine_config or {}),
            redaction=DESCRIPTION,
        )
        self._have_client = False
        #: The client sent a request other than initialize (a later initialize is refused).
        self._past_initialize = False
        self._have_codex = False

    def _t(self) -> float:
        return round(self._clock() - self._start, 6)

    def message(self, direction: str, data: bytes) -> None:
        """Record one message (``to_client`` is not recorded: replay computes it)."""
        if direction == "to_client":
            return
        record = self._message_record(direction, data)
        self._messages += 1
        if self._held is not None:
            self._learn(direction, data)
        self._write(encode_record(record))

    def event(self, name: str, reason: str = "", **facts: Unpack[EventFacts]) -> None:
        if facts.get("data"):
            facts["data"] = self._redactor.value(facts["data"])
        self._write(encode_record(EventRecord(t=self._t(), event=name, reason=reason, **facts)))

    def close(self) -> None:
        """Write the end record (its absence marks a truncated recording) and flush."""
        self._release()
        self._out.write(encode_record(EndRecord(t=self._t(), messages=self._messages)))
        self._out.flush()

    # -- internals -------------------------------------------------------------------

    def _message_record(self, direction: str, data: bytes) -> MessageRecord:
        try:
            decoded = msgspec.json.decode(data)
            if self._redactor.might_need(data):
                raw = msgspec.json.encode(self._redactor.value(decoded))
            else:
                raw = data
        except (msgspec.DecodeError, RecursionError):
            # Not JSON (a client's malformed line), or nested too deep to walk: keep
            # it as text so a replay shows the same error.
            text = self._redactor.value(data.decode(errors="replace"))
            return MessageRecord(t=self._t(), dir=direction, text=text)
        return MessageRecord(t=self._t(), dir=direction, message=msgspec.Raw(raw))

    def _learn(self, direction: str, data: bytes) -> None:
        try:
            message = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return
        if not isinstance(message, dict):
            return
        if (
            direction == "from_client"
            and "id" in message
            and message.get("method")
            not in (
                "initialize",
                None,
            )
        ):
            self._past_initialize = True
        if (
            direction == "from_client"
            and message.get("method") == "initialize"
            and not self._past_initialize  # a late one is refused: the version stands
        ):
            params = message.get("params") or {}
            # A refused initialize leaves the version as it was: the recording shows the error.
            with contextlib.suppress(RpcError):
                self.header.acpVersion = negotiate(msgspec.json.encode(params))
            if self.header.acpVersion >= 2:
                self.header.clientCapabilities = params.get("capabilities") or {}
                self.header.clientInfo = params.get("info")
            else:
                self.header.clientCapabilities = params.get("clientCapabilities") or {}
                self.header.clientInfo = params.get("clientInfo")
            self._have_client = True
        elif direction == "from_codex" and message.get("id") == 0 and "result" in message:
            # The engine's first Codex request, id 0, is always initialize.
            agent = str((message.get("result") or {}).get("userAgent") or "")
            match = _VERSION_IN_AGENT.search(agent)
            self.header.codexUserAgent = agent
            self.header.codex = match.group(1) if match else ""
            self._have_codex = True
        if self._have_client and self._have_codex:
            self._release()

    def _write(self, line: bytes) -> None:
        if self._held is not None:
            self._held.append(line)
            if len(self._held) >= _HOLD_AT_MOST:
                self._release()
        else:
            self._out.write(line)

    def _release(self) -> None:
        if self._held is None:
            return
        held, self._held = self._held, None
        self._out.write(encode_record(self.header))
        self._out.writelines(held)
        self._out.flush()

    @property
    def redactions(self) -> int:
        return self._redactor.count
