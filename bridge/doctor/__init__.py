"""``codex-acp-bridge doctor``: what would stop the bridge, said before a bug is filed.

One checklist, in this order:

- **Codex binary**: the one ``serve`` would run (:func:`bridge.shell.codex_transport.find_codex`:
  ``--codex-bin``, the env var, PATH, the pinned copy) and its ``--version``, against the tested
  range (:mod:`bridge.codex.versions`): missing ✗, outside the range !;
- **Credentials**: what Codex's own ``account/read`` says (a ChatGPT sign-in, an API key, a
  provider that needs no OpenAI login), completed by what Codex cannot know: an API key in the
  bridge's environment (``serve`` hands it to Codex when the editor picks that method), the
  ``env_key`` a custom provider reads. When Codex cannot be asked, the files say it instead
  (``CODEX_HOME/auth.json``, ``config.toml``'s provider);
- **config.toml**: what ``serve`` will do with it. Codex 0.169 starts on a config it cannot
  load (a TOML syntax error, a value of the wrong type, an unknown provider): ``initialize`` and
  ``account/read`` answer, a ``configWarning`` says "Invalid configuration; using defaults.",
  but every ``thread/start``, so every ``session/new``, fails with "failed to load configuration:
  <where: what>". Doctor asks Codex's ``config/read`` (cheap, starts nothing); when that fails it
  tries the ``thread/start`` ``serve`` would send (ephemeral, in an empty temporary folder) and
  quotes Codex's answer, the one position Codex gives. Only when Codex cannot be asked does
  ``tomllib`` speak (its own position);
- **Daemon**: whether one runs on the runtime directory (the lock held, :mod:`bridge.daemon.runtime`),
  its state, and whether the directory is the user's own and private;
- **Codex used**: which Codex ``serve`` would use and why, as ``serve`` decides it
  (:func:`bridge.codex_choice.choose_codex`): the bridge's daemon, Codex's own daemon, or one of
  its own;
- **Profile**: the Codex config profile ``serve`` would put in force (``--profile``, its
  variable, else the daemon's) and its file, as :func:`bridge.serve.read_profiles` reads
  them, and the others a session may pick: one named that cannot be used ✗ (``serve``
  refuses to start), a file that is no profile or a key no thread's config changes !;
- **initialize round trip**: ``codex app-server`` started as ``serve`` starts it, ``initialize``
  (with ``experimentalApi``, as the engine sends it) answered within a time limit, then
  ``account/read``; the time it took and Codex's ``userAgent``, and what Codex warned about
  meanwhile (a missing sandbox tool, ...). Codex is stopped with its process group, as
  ``serve`` stops it;
- **each machine** the user named (the machines file, ``--machine``; ``--ssh-command``),
  three lines each (:mod:`bridge.doctor.machine_probe`, all machines at once): *reachable*
  (ssh logged in, in ssh's own words when not: a refused login, an unknown or changed host
  key, a timeout; a ws:// machine: a TCP connection), its *Codex* (the remote version
  against this one's: the link refuses another), and its *exec-server* (the command the
  link runs, answering ``initialize`` in time; a ws:// machine's with its token). A
  machines file or flag that cannot be used is one ✗ line, ``Machines``.

✓ is fine, ! a warning that does not block use, ✗ blocks use: the exit status is 1 when any
check is ✗, else 0, for the checklist and for ``--json`` alike.

STYLE: the findings are gathered first (:func:`gather`, the only part doing I/O, with trio),
then turned into checks by pure functions (one per check, :func:`checklist`), which the tests
feed made-up findings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import partial

import trio

from ..machines import MachineSpec
from .checks import (
    BINARY,
    CHOICE,
    CONFIG,
    CREDENTIALS,
    DAEMON,
    INSTALL_HINT,
    LOGIN_HINT,
    MACHINES,
    MARKS,
    PROFILE,
    ROUND_TRIP,
    Check,
    Status,
    as_json,
    binary_check,
    checklist,
    choice_check,
    config_check,
    credentials_check,
    daemon_check,
    exec_server_check,
    exit_code,
    machine_checks,
    machine_codex_check,
    machines_error_check,
    overall,
    profile_check,
    reach_check,
    render,
    round_trip_check,
    selected_provider,
)
from .findings import (
    CodexBinary,
    CodexWarning,
    ConfigFile,
    ConfigTrial,
    Environment,
    ExecServer,
    Findings,
    Handshake,
    MachineFound,
    RuntimeDir,
)
from .gather import gather
from .handshake import shake_hands

__all__ = [
    "BINARY",
    "CHOICE",
    "CONFIG",
    "CREDENTIALS",
    "DAEMON",
    "INSTALL_HINT",
    "LOGIN_HINT",
    "MACHINES",
    "MARKS",
    "PROFILE",
    "ROUND_TRIP",
    "Check",
    "CodexBinary",
    "CodexWarning",
    "ConfigFile",
    "ConfigTrial",
    "Environment",
    "ExecServer",
    "Findings",
    "Handshake",
    "MachineFound",
    "RuntimeDir",
    "Status",
    "as_json",
    "binary_check",
    "checklist",
    "choice_check",
    "config_check",
    "credentials_check",
    "daemon_check",
    "exec_server_check",
    "exit_code",
    "gather",
    "machine_checks",
    "machine_codex_check",
    "machines_error_check",
    "overall",
    "profile_check",
    "reach_check",
    "render",
    "round_trip_check",
    "run_doctor",
    "selected_provider",
    "shake_hands",
]


def run_doctor(
    codex_bin: str | None,
    runtime: str | None,
    *,
    json_output: bool,
    machines: Sequence[MachineSpec] = (),
    ssh: Sequence[str] = (),
    machines_error: str | None = None,
    profile: str | None = None,
) -> int:
    """Gather, print the checklist (or its JSON) on stdout; the exit status."""
    findings = trio.run(
        partial(
            gather,
            codex_bin,
            runtime,
            dict(os.environ),
            machines=machines,
            ssh=ssh,
            machines_error=machines_error,
            profile=profile,
        )
    )
    checks = checklist(findings)
    if json_output:
        print(json.dumps(as_json(checks), indent=2, ensure_ascii=False))
    else:
        print(render(checks), end="")
    return exit_code(checks)
