"""``python -m bridge.daemon.guard CODEX ARGS...``: run Codex so that it dies with the daemon.

The daemon starts this guard (a process group of its own) with a pipe as its
stdin and never writes to it. The guard runs Codex in its group, writes Codex's
pid on its stdout (one line, then closes it: the daemon publishes that pid), and
waits: when the pipe closes (the daemon is gone, however it died, SIGKILL
included) it stops the whole group, Codex and what Codex started; when Codex
exits, the guard exits with its status. SIGTERM is passed on to Codex, which is
killed if it has not exited :data:`GRACE_SECONDS` later. Only the standard
library: it must start fast and alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

#: How long Codex has to exit after SIGTERM before it is killed.
GRACE_SECONDS = 3.0


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m bridge.daemon.guard CODEX [ARGS...]", file=sys.stderr)
        return 2
    codex = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    print(codex.pid, flush=True)
    sys.stdout.close()

    def stop_group(_signum: int = 0, _frame: object = None) -> None:
        try:
            os.killpg(0, signal.SIGTERM)
            time.sleep(2)
            os.killpg(0, signal.SIGKILL)
        except ProcessLookupError:
            pass

    daemon_gone = threading.Event()

    def watch_daemon() -> None:
        while sys.stdin.buffer.read(4096):  # the daemon never writes: this waits for EOF
            pass
        daemon_gone.set()
        stop_group()

    def on_sigterm(signum: int, _frame: object) -> None:
        # Only pass it on: the main thread's wait returns when Codex exits. (Waiting here,
        # inside that wait, could never reap Codex: the wait holds Popen's lock.)
        codex.send_signal(signum)
        killer = threading.Timer(GRACE_SECONDS, codex.kill)
        killer.daemon = True
        killer.start()

    # SIGTERM from the daemon (or anyone) reaches the whole group; the guard goes last.
    signal.signal(signal.SIGTERM, on_sigterm)
    watcher = threading.Thread(target=watch_daemon, daemon=True)
    watcher.start()
    code = codex.wait()
    if daemon_gone.is_set():
        watcher.join()  # the group's SIGKILL ends what Codex left behind (and the guard)
    return code


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # At once: a normal shutdown waits on the thread still reading stdin (about a second,
    # then aborts), which would hold up the daemon's stop.
    sys.stderr.flush()
    os._exit(code if code >= 0 else 128 - code)
