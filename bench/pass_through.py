"""The thinnest process that can stand between a client and ``codex app-server``: bytes in
both directions, as they come, no parsing, no trio (one ``selectors`` loop).

``bench/stored_work.py --pass-through`` drives its bare client through it: what any adapter
costs by being a process of its own (two more pipes, two more wake-ups a round trip), beside
what the bridge costs.

    python bench/pass_through.py CODEX_PROGRAM [ARGS...]   # runs CODEX_PROGRAM app-server ARGS
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys


def main(argv: list[str]) -> int:
    codex = subprocess.Popen(
        [argv[0], "app-server", *argv[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    assert codex.stdin is not None and codex.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, codex.stdin.fileno())  # client -> Codex
    selector.register(codex.stdout.fileno(), selectors.EVENT_READ, 1)  # Codex -> client
    while True:
        for key, _ in selector.select():
            data = os.read(key.fd, 1 << 20)
            if not data:  # either side closed: so does this
                codex.stdin.close()
                return codex.wait()
            os.write(key.data, data)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
