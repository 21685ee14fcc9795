"""``codex-acp-bridge --login``: ACP's terminal sign-in, which is Codex's own ``codex login``.

An ACP client that can run the agent in a terminal (``auth.terminal``) is offered the
``codex-login`` method; choosing it, the client runs the agent's usual command with
``--login`` appended in a terminal, and the process's exit status says whether it
worked (0: signed in). The sign-in itself is Codex's: it stores the credentials in
``CODEX_HOME``, where every Codex the bridge starts finds them.

On a machine without a browser (reached over SSH, or with no display) Codex's
browser flow cannot complete: there ``codex login --device-auth`` shows a code to
enter at chatgpt.com from any other device. ``--device-auth`` / ``--browser``
choose explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from .codex_process import EXIT_CODEX_UNAVAILABLE
from .codex_transport import CodexUnavailable, codex_launch, find_codex


def remote(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether a browser on this machine is out of the user's reach: an SSH session, or
    a Linux without a display."""
    if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
        return True
    return platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def login_argv(device_auth: bool | None, env: Mapping[str, str]) -> list[str]:
    """Codex's arguments: ``login``, with ``--device-auth`` when asked or when remote."""
    use_device = remote(env) if device_auth is None else device_auth
    return ["login", "--device-auth"] if use_device else ["login"]


def run_login(codex_bin: str | None, device_auth: bool | None) -> int:
    """Run Codex's sign-in in this terminal; its exit status."""
    env = dict(os.environ)
    try:
        binary = find_codex(codex_bin, env)
        launch = codex_launch(binary, env)
    except CodexUnavailable as exc:
        print(f"codex-acp-bridge: {exc}", file=sys.stderr)
        return EXIT_CODEX_UNAVAILABLE
    argv = [launch.program, *login_argv(device_auth, env)]
    how = "a device code" if "--device-auth" in argv else "your browser"
    print(f"Signing in to Codex with ChatGPT ({how}): codex {' '.join(argv[1:])}", file=sys.stderr)
    try:
        # The terminal is the user's: Codex reads and writes it directly.
        return subprocess.run(argv, env=launch.env, check=False).returncode
    except OSError as exc:
        print(f"cannot run Codex ({binary}): {exc.strerror or exc}", file=sys.stderr)
        return 2
