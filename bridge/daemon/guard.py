"""``python -m bridge.daemon.guard CODEX ARGS...``: run Codex so that it dies with the daemon.

The daemon starts this guard (a process group of its own) with a pipe as its
stdin and never writes to it. The guard runs Codex in its group and waits: when
the pipe closes (the daemon is gone, however it died, SIGKILL included) it stops
the whole group, Codex and what Codex started; when Codex exits, the guard exits
with its status. Only the standard library: it must start fast and alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m bridge.daemon.guard CODEX [ARGS...]", file=sys.stderr)
        return 2
    codex = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def stop_group(_signum: int = 0, _frame: object = None) -> None:
        try:
            os.killpg(0, signal.SIGTERM)
            time.sleep(2)
            os.killpg(0, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def watch_daemon() -> None:
        while sys.stdin.buffer.read(4096):  # the daemon never writes: this waits for EOF
            pass
        stop_group()

    # SIGTERM from the daemon (or anyone) reaches the whole group; the guard goes last.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(_forward(codex, signal.SIGTERM)))
    threading.Thread(target=watch_daemon, daemon=True).start()
    return codex.wait()


def _forward(codex: subprocess.Popen[bytes], signum: int) -> int:
    codex.send_signal(signum)
    try:
        return codex.wait(timeout=3)
    except subprocess.TimeoutExpired:
        codex.kill()
        return codex.wait()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.exit(code if code >= 0 else 128 - code)
