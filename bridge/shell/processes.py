"""The processes a machine's link runs (ssh, a container runtime, a machine's own command):
their stdout as lines, the tail of their stderr, their end; and a command run to its end, with
its own last words when it fails."""

from __future__ import annotations

import contextlib
import logging
import shlex
import subprocess

import trio

log = logging.getLogger(__name__)

#: How long a check's command, or a link's first line, may take (ssh's own timeouts come
#: first).
CHECK_SECONDS = 30.0
#: A frame or a line: the exec-server carries whole files and outputs.
MAX_MESSAGE = 256 * 1024 * 1024
#: After Codex closed its side, how long the remote end has to finish before it is killed.
CLOSE_SECONDS = 2.0


class Lines:
    """Newline-delimited messages from a stream (no size cap but :data:`MAX_MESSAGE`)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._searched = 0

    async def next(self) -> bytes | None:
        while True:
            end = self._buffer.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._searched = 0
                return line
            self._searched = len(self._buffer)
            if len(self._buffer) > MAX_MESSAGE:
                raise trio.BrokenResourceError("a line longer than the link carries")
            data = await self._stream.receive_some(1 << 16)
            if not data:
                return None
            self._buffer += data


class StderrTail:
    """The last few KB a process wrote to stderr (ssh's words on a failure), read to its
    end before a process that ended has them quoted (:meth:`finished`)."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._done = trio.Event()

    async def collect(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            while data := await stream.receive_some(1 << 14):
                self._data += data
                del self._data[:-8192]
                for line in data.decode(errors="replace").splitlines():
                    if line.strip():
                        log.debug("ssh: %s", line)
        finally:
            self._done.set()

    async def finished(self) -> None:
        """Until the stream ended (a process that exited): its last words are in."""
        with trio.move_on_after(CLOSE_SECONDS):
            await self._done.wait()

    def text(self) -> str:
        return self._data.decode(errors="replace")


async def close_ssh(process: trio.Process) -> None:
    """End an ssh that runs an exec-server: its stdin closed (the exec-server ends at EOF,
    and ssh with it), killed if it has not ended within :data:`CLOSE_SECONDS`. Shielded:
    a caller cancelled still has it reaped."""
    with trio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await process.stdin.aclose()
        with trio.move_on_after(CLOSE_SECONDS):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def finished(
    argv: list[str], seconds: float
) -> subprocess.CompletedProcess[bytes] | trio.TooSlowError | OSError:
    """``argv`` run to its end within ``seconds``, its output kept; or what stopped it."""
    try:
        with trio.fail_after(seconds):
            return await trio.run_process(
                argv,
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    except (trio.TooSlowError, OSError) as exc:
        return exc


def could_not_run(argv: list[str], exc: OSError) -> str:
    """Why ``argv`` did not start, in the system's words."""
    return f"could not run {argv[0]!r}: {exc.strerror or exc}"


async def run(argv: list[str], seconds: float) -> str | None:
    """Run ``argv`` to its end: ``None``, or why it failed (its own last words)."""
    done = await finished(argv, seconds)
    if isinstance(done, trio.TooSlowError):
        return f"{shlex.join(argv[:2])} took over {seconds:.0f} s"
    if isinstance(done, OSError):
        return could_not_run(argv, done)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.decode(errors="replace").splitlines()]
        words = "; ".join(line for line in lines if line)[-500:]
        return f"{shlex.join(argv[:2])} ended {done.returncode}: {words or 'no words'}"
    return None


async def output(argv: list[str], seconds: float) -> str:
    """``argv``'s output, stripped, or ``!`` and why it failed."""
    done = await finished(argv, seconds)
    if isinstance(done, trio.TooSlowError):
        return f"!{shlex.join(argv[:3])} took over {seconds:.0f} s"
    if isinstance(done, OSError):
        return f"!{could_not_run(argv, done)}"
    if done.returncode != 0:
        words = done.stderr.decode(errors="replace").strip().splitlines()
        return f"!{shlex.join(argv[:3])}: {words[-1] if words else done.returncode}"
    return str(done.stdout.decode(errors="replace").strip())
