"""What a test's ``CODEX_HOME`` starts with, and a cheaper ``lsb_release`` for Codex's start.

A Codex started on an empty home first makes it its own: it creates its sqlite databases
(``state_5.sqlite`` and four more, running each one's migrations) and writes its system skills
(``skills/.system``, some sixty files), ~0.05 s of CPU of the ~0.15 s a start and one
``thread/start`` cost. A :class:`CodexHomeTemplate` is a home the real Codex (the test's own
binary: its migrations are its version's) has started on once, initialized and ended, no thread
and no model request; a test's home is seeded from it before its ``config.toml`` is written, so
each test's Codex finds what any home it had used before would hold, and nothing of a test.

Only what Codex made for itself is seeded: the databases, checkpointed (a single file each, no
``-wal`` or ``-shm``) and copied, and the system skills. Not ``installation_id`` (each home makes
its own) and not the template's ``config.toml`` (the test writes its own).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from bridge.scripted_model import write_codex_home
from bridge.shell.codex_transport import codex_launch

#: How long the template's Codex may take to start, answer ``initialize`` and exit.
START_SECONDS = 30

#: The provider ``base_url`` of the template's config.toml: no request reaches it (the template's
#: Codex starts no thread), and the port is one nothing listens on.
_NO_MODEL = "http://127.0.0.1:9/v1"

_INITIALIZE = {
    "id": 1,
    "method": "initialize",
    "params": {
        "clientInfo": {"name": "codex-home-template", "version": "1"},
        "capabilities": {"experimentalApi": True},
    },
}


@dataclass(frozen=True)
class CodexHomeTemplate:
    """A home a Codex has started on once (``root``), and what of it a test's home gets."""

    root: Path
    #: The databases, each one checkpointed file: copied (Codex writes them).
    databases: tuple[str, ...]
    #: The system skills' folders and files (relative to ``root``).
    skill_dirs: tuple[str, ...]
    skill_files: tuple[str, ...]

    def seed(self, home: Path) -> None:
        """Create ``home`` (which must not exist) with the template's databases and skills.

        The skills' files are hard links: Codex only reads them (a Codex that finds them out of
        date removes the folder and writes new files, never into these), and linking spares the
        creation of some sixty files a test, the most system CPU of seeding a home. Where a link
        cannot be made (another file system), they are copied.
        """
        home.mkdir()
        for name in self.databases:
            shutil.copyfile(self.root / name, home / name)
        for relative in self.skill_dirs:
            (home / relative).mkdir()
        for relative in self.skill_files:
            try:
                os.link(self.root / relative, home / relative)
            except OSError:
                shutil.copy2(self.root / relative, home / relative)


def make_codex_home_template(codex_bin: str, directory: Path) -> CodexHomeTemplate:
    """Start ``codex_bin``'s app-server on ``directory/home`` (created), ``initialize`` it,
    close its stdin and wait for it to exit; what it wrote there, ready to seed homes from.

    Its stderr is in ``directory/codex-stderr.log``. A Codex that does not answer, or exits
    with an error, fails with what it said."""
    root = directory / "home"
    write_codex_home(root, _NO_MODEL)
    env = {**os.environ, "CODEX_HOME": str(root)}
    env.pop("OPENAI_API_KEY", None)
    launch = codex_launch(codex_bin, env)
    log_path = directory / "codex-stderr.log"
    with (
        log_path.open("wb") as log,
        subprocess.Popen(
            [launch.program, "app-server"],
            env=launch.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        ) as codex,
    ):
        assert codex.stdin is not None and codex.stdout is not None
        timer = threading.Timer(START_SECONDS, codex.kill)
        timer.start()
        try:
            codex.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
            codex.stdin.flush()
            answer: dict[str, object] = {}
            for line in codex.stdout:
                message = json.loads(line)
                if message.get("id") == 1:
                    answer = message
                    break
            # Closing stdin only once it has answered: a Codex that reads the end of its
            # input at once may exit before it has made its home.
            codex.stdin.close()
            codex.stdout.read()
            code = codex.wait()
        finally:
            timer.cancel()
            if codex.poll() is None:
                codex.kill()
    said = log_path.read_text(errors="replace")
    assert "result" in answer and code == 0, (
        f"the Codex home template's Codex ({codex_bin}) answered initialize with {answer} "
        f"and exited {code}; its stderr:\n{said}"
    )
    databases = tuple(sorted(path.name for path in root.glob("*.sqlite")))
    for name in databases:
        _checkpoint(root / name)
    left = sorted(path.name for path in root.glob("*.sqlite-*"))
    assert not left, f"the template's databases still have {left} after their checkpoint"
    skills = root / "skills"
    # Sorted, a folder comes before what it holds.
    tree = [skills, *sorted(skills.rglob("*"))] if skills.is_dir() else []
    return CodexHomeTemplate(
        root,
        databases,
        tuple(str(p.relative_to(root)) for p in tree if p.is_dir()),
        tuple(str(p.relative_to(root)) for p in tree if p.is_file()),
    )


def _checkpoint(database: Path) -> None:
    """Fold ``database``'s write-ahead log into it; closing the last connection of a WAL
    database then removes its ``-wal`` and ``-shm`` files."""
    connection = sqlite3.connect(database)
    try:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, f"{database} is in use"
    finally:
        connection.close()


def lsb_release_stub(directory: Path) -> Path | None:
    """A folder (``directory``, created) holding an ``lsb_release`` that prints what this
    machine's prints for ``lsb_release -a`` and runs the real one for anything else; ``None``
    where there is no ``lsb_release``.

    Codex asks ``lsb_release -a`` twice a start (its user agent names the OS): a shell script
    that forks eight processes, ~10 ms of CPU each time, where this one is a ``printf``
    (~1 ms). With the folder first on ``PATH`` Codex's user agent is the same."""
    real = shutil.which("lsb_release")
    if real is None:
        return None
    ran = subprocess.run([real, "-a"], capture_output=True, timeout=30, check=False)
    out = ran.stdout.decode("utf-8", "surrogateescape")
    err = ran.stderr.decode("utf-8", "surrogateescape")
    directory.mkdir(parents=True, exist_ok=True)
    stub = directory / "lsb_release"
    said = f"    printf '%s' {shlex.quote(out)}\n"
    if err:
        said += f"    printf '%s' {shlex.quote(err)} >&2\n"
    stub.write_text(
        "#!/bin/sh\n"
        "# What `lsb_release -a` printed when the test session began; the real one otherwise.\n"
        'if [ "$#" -eq 1 ] && [ "$1" = "-a" ]; then\n'
        f"{said}    exit {ran.returncode}\n"
        "fi\n"
        f'exec {shlex.quote(real)} "$@"\n',
        encoding="utf-8",
        errors="surrogateescape",
    )
    stub.chmod(0o755)
    return directory


def openai_key_in_the_environment(
    codex_home: Path, base_url: str, bridge_env: dict[str, str], key: str
) -> None:
    """A Codex home whose provider requires OpenAI's auth, and ``key`` in the bridge's
    environment as ``OPENAI_API_KEY`` alone (no ``CODEX_API_KEY``)."""
    write_codex_home(
        codex_home, base_url, extra_toml="[model_providers.mock]\nrequires_openai_auth = true"
    )
    bridge_env.pop("CODEX_API_KEY", None)
    bridge_env["OPENAI_API_KEY"] = key
