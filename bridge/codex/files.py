"""Codex app-server file methods (``fs/readFile``, ``fs/writeFile``, ``fs/remove``,
``fs/createDirectory``; stable API since 0.169) and ``thread/revert``, behind ``/rewind``.

Codex's file methods act on *the app-server's own machine* (its schema: "the host
filesystem"): they take an absolute path and no environment, so they reach the files of
a thread whose environment is ``local``, wherever the bridge runs, and never those of a
thread that works on another machine. That machine's ``codex exec-server`` answers the
same methods itself (0.171: ``fs/readFile``, ``fs/writeFile``, ``fs/remove``,
``fs/createDirectory``, the same parameters, each path a ``file://`` URI: :func:`file_uri`),
which the bridge asks over a connection of its own to it (``bridge/shell/machine_files.py``).
Contents travel as base64.

Same conventions as :mod:`bridge.codex.types`: only the members the bridge uses, unknown
fields ignored.
"""

from __future__ import annotations

from urllib.parse import quote

from msgspec import UNSET, UnsetType

from ..wire import WireStruct as _Base

READ_FILE = "fs/readFile"
WRITE_FILE = "fs/writeFile"
REMOVE = "fs/remove"
CREATE_DIRECTORY = "fs/createDirectory"
#: Replace a thread's stored history by the part before one turn (the files stay as they
#: are); Codex answers, then sends ``thread/reverted {threadId}``.
REVERT = "thread/revert"

#: The end of Codex's message for a path that does not exist (0.171: ``No such file or
#: directory (os error 2)``, -32603 from the app-server, -32004 from an exec-server), the
#: only way its answer tells "absent" apart.
NOT_FOUND = "(os error 2)"

#: An exec-server's handshake: ``initialize {clientName}`` answered with its
#: ``environmentInfo``, then the ``initialized`` notification.
EXEC_INITIALIZE = "initialize"
EXEC_INITIALIZED = "initialized"


def not_found(message: str) -> bool:
    """Codex's error says the path does not exist (see :data:`NOT_FOUND`)."""
    return message.rstrip().endswith(NOT_FOUND)


def file_uri(path: str) -> str:
    """An absolute path as the exec-server takes it: ``/a b/c`` → ``file:///a%20b/c`` (it
    refuses a bare path: ``invalid URI: relative URL without a base``)."""
    return "file://" + quote(path.encode("utf-8", "surrogateescape"), safe="/")


class FsReadFileParams(_Base):
    #: Absolute (Codex refuses a relative path).
    path: str


class FsReadFileResult(_Base):
    dataBase64: str


class FsWriteFileParams(_Base):
    """Write a whole file (its folder must exist: Codex creates none)."""

    path: str
    dataBase64: str


class FsRemoveParams(_Base):
    path: str
    #: ``False``: a folder is never removed with what it holds (Codex's default: ``True``).
    recursive: bool | UnsetType = UNSET
    #: ``False``: a path that is already gone is an error (Codex's default: ``True``).
    force: bool | UnsetType = UNSET


class FsCreateDirectoryParams(_Base):
    path: str
    #: Create the missing folders above it too (Codex's default).
    recursive: bool | UnsetType = UNSET


class ThreadRevertParams(_Base):
    threadId: str
    #: The first turn left out: it and every later turn leave the stored history.
    beforeTurnId: str
