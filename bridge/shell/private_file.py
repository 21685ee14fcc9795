"""Files only this user reads: a log file, a recording.

:func:`open_private` creates the file 0600 and never through a symbolic link
(``O_NOFOLLOW``): another local user who plants a link where the file will be (in a
shared ``/tmp``, say) gets nothing written where it leads. A file that is there already
is written only when it is a regular file of this user's with no other name, and is made
0600 first: a hard link is refused as a symbolic link is (where the system lets another
user link a file of this user's, as macOS does and Linux with ``fs.protected_hardlinks=0``,
the name could be a second one for ``~/.zshrc``).
Anything else is refused with :class:`RefusedFile`, whose message says what is wrong
and what to do.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["RefusedFile", "open_private"]


class RefusedFile(ValueError):
    """The file named cannot be written as a private file: the message says why."""


def open_private(path: str, *, append: bool) -> int:
    """A descriptor of ``path`` opened for writing, private to this user: appended to with
    ``append``, else emptied (for ``os.fdopen``)."""
    # O_NONBLOCK: a FIFO planted there must not hold the open until someone reads it.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o600)
    except OSError as exc:
        raise _refused(path, exc) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise RefusedFile(f"{path} is not a regular file: name a file of your own")
        if found.st_uid != os.geteuid():
            raise RefusedFile(
                f"{path} belongs to another user (uid {found.st_uid}): name a file of your own"
            )
        if found.st_nlink > 1:
            raise RefusedFile(
                f"{path} has {found.st_nlink} hard links (the same file under another name, "
                "which writing it would change): remove it, or name another file"
            )
        os.set_blocking(fd, True)
        if stat.S_IMODE(found.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
        if not append:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refused(path: str, exc: OSError) -> RefusedFile:
    if exc.errno == errno.ELOOP and os.path.islink(path):
        return RefusedFile(
            f"{path} is a symbolic link, which is never followed: name the file itself"
        )
    if exc.errno == errno.ENXIO:  # a FIFO that nobody reads
        return RefusedFile(f"{path} is not a regular file: name a file of your own")
    return RefusedFile(f"cannot write {path}: {exc.strerror or exc}")
