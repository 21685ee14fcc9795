"""Where the logs go, and what never does: a secret.

:func:`setup_logging` sends every logger (the bridge's, and third parties' such as
websockets') to stderr or to a ``--log-file``, which is created 0600 and never through a
symbolic link (:func:`bridge.shell.private_file.open_private`). Its handler carries
:class:`RedactingFilter`, so whatever a logger writes passes the rules of
:mod:`bridge.redaction` first: ``Authorization`` headers keep their scheme and lose their
value (websockets writes a client's request headers at debug level, the capability token
of Codex among them), cookies their values, ``?token=`` and other secret-named parameters
theirs, and credentials by their look are replaced wherever they appear. A WebSocket frame
that websockets logs at debug level is redacted whole before websockets shortens it for
the line, by the rules recordings follow (an ``apiKey`` or an ``authBearerToken`` member
is then gone, wherever it sits in the message).

The bridge's own log calls do not rely on it: what they write is chosen to hold no secret
(a command line is logged through :func:`bridge.redaction.command_line`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any

from .redaction import redact_text
from .shell.private_file import open_private

__all__ = ["PrivateFileHandler", "RedactingFilter", "setup_logging"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class PrivateFileHandler(logging.FileHandler):
    """A ``FileHandler`` whose file is private (:func:`open_private`): appended to, 0600."""

    def _open(self) -> Any:
        fd = open_private(self.baseFilename, append=True)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)


class RedactingFilter(logging.Filter):
    """Takes the secrets out of a record before a handler formats it (see the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_frame(arg) for arg in record.args)
        try:
            message = record.getMessage()
        except Exception:  # logging itself reports a record it cannot format
            return True
        # Formatted once, here: the handler's formatter takes the message as it is.
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


_formatter = logging.Formatter()


def _frame(arg: Any) -> Any:
    """A websockets ``Frame`` with its payload redacted; anything else as it is."""
    # Known by its name: websockets is not imported for the logs' sake.
    if type(arg).__name__ != "Frame" or not dataclasses.is_dataclass(arg) or isinstance(arg, type):
        return arg
    data = getattr(arg, "data", None)
    if not isinstance(data, bytes | bytearray | memoryview):
        return arg
    redacted = _payload(bytes(data))
    return arg if redacted is None else dataclasses.replace(arg, data=redacted)


def _payload(data: bytes) -> bytes | None:
    """A frame's payload redacted, ``None`` when nothing in it is a secret."""
    import msgspec

    from .recording.redact import Redactor

    redactor = Redactor()
    if not redactor.might_need(data):
        return None
    try:
        text = msgspec.json.encode(redactor.value(msgspec.json.decode(data))).decode()
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        text = data.decode(errors="replace")
    redacted = redact_text(text)
    return redacted.encode() if redactor.count or redacted != text else None


def setup_logging(level: str, log_file: str | None) -> None:
    """Every logger to stderr, or to ``log_file``, at ``level``, through the redacting
    filter. Raises :class:`~bridge.shell.private_file.RefusedFile` for a file that cannot
    be private (a symbolic link, another user's)."""
    handler: logging.Handler = (
        PrivateFileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
