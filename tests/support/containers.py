"""Real containers, of a test's own, as the machines sessions work on.

Debian's rootful ``podman`` with ``runc`` and a Debian image built on this machine from its
own apt sources (no registry): ``scripts/setup-containers``, which ``scripts/setup`` runs in
the background (``tools/.containers.started``, then ``tools/.containers.done`` holding its
exit status). :func:`podman_or_skip` waits for it, bounded, and skips the test with one line
when there is no podman or no image to be had.

Two settings this kind of machine needs are in a private file given as ``CONTAINERS_CONF``
(:func:`containers_conf`; nothing under ``/etc`` changes): a hard ``nofile`` limit no higher
than the machine allows (raising one is refused here, even to root), and ``runc`` (crun
cannot run in this cgroup layout).

:func:`running_container` starts ``podman run -d --name cab-test-... IMAGE sleep infinity``
with the pinned Codex's whole vendor folder mounted read-only at ``/opt/codex`` (the binary
alone has no bundled bubblewrap and says it is version 0.0.0), or with no Codex in it at all
(``codex=False``: the bridge brings its own), and removes the container (``podman rm -f``)
whatever happens.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from bridge.shell.codex_transport import PINNED_CODEX

ROOT = Path(__file__).resolve().parents[2]
STARTED, DONE, LOG = (ROOT / "tools" / f".containers.{n}" for n in ("started", "done", "log"))
IMAGE = "localhost/deb-minbase:bookworm"
#: How long a test waits for setup's background install of podman and build of the image.
SETUP_SECONDS = 240
#: One podman command (run, exec, stop, start, rm).
PODMAN_SECONDS = 30
#: Where the Codex vendor folder is inside each container, and its binary.
CODEX_DIR = "/opt/codex"
CODEX_IN = f"{CODEX_DIR}/bin/codex"
#: The settings this machine needs (see the module docstring).
CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
"""


def vendor_folder() -> Path:
    """The pinned Codex package's vendor folder for this architecture (musl: static)."""
    package = PINNED_CODEX.resolve().parents[1]  # node_modules/@openai/codex
    found = (package.parent / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl").resolve()
    if not (found / "bin" / "codex").exists():
        pytest.fail(f"the pinned Codex's vendor folder is not at {found}: run scripts/setup")
    return found


def containers_conf(directory: Path) -> Path:
    """The private ``CONTAINERS_CONF`` file, written in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "containers.conf"
    path.write_text(CONF)
    return path


async def podman_or_skip(env: Mapping[str, str]) -> str:
    """The path of podman with the image there, once setup's background work has ended."""

    async def ready() -> bool:
        if shutil.which("podman") is None:
            return False
        done = await trio.run_process(
            ["podman", "image", "exists", IMAGE], env=dict(env), check=False
        )
        return done.returncode == 0

    if not await ready() and STARTED.exists():
        with trio.move_on_after(SETUP_SECONDS):
            while not DONE.exists():  # noqa: ASYNC110 (the script says nothing else at its end)
                await trio.sleep(0.5)
    if not await ready():
        why = (
            f"its setup failed ({LOG})"
            if DONE.exists() and DONE.read_text().strip() != "0"
            else "scripts/setup installs podman and builds it as root (scripts/setup-containers)"
        )
        pytest.skip(f"no podman with the image {IMAGE}: {why}")
    found = shutil.which("podman")
    assert found is not None
    return found


async def podman(env: Mapping[str, str], *args: str, check: bool = True) -> str:
    """``podman ARGS``: its output; a failure says podman's words."""
    with trio.fail_after(PODMAN_SECONDS):
        done = await trio.run_process(
            ["podman", *args],
            env=dict(env),
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.stderr.decode().strip()}")
    return str(done.stdout.decode())


@dataclass
class Container:
    """A running container of a test's own."""

    name: str
    env: dict[str, str]

    async def exec(self, *argv: str) -> str:
        """``argv`` run inside: its output."""
        return await podman(self.env, "exec", self.name, *argv)

    async def exists_inside(self, path: str) -> bool:
        state = await podman(
            self.env, "exec", self.name, "sh", "-c", f"test -e '{path}' && echo yes || echo no"
        )
        return state.strip() == "yes"

    async def stop(self) -> None:
        await podman(self.env, "stop", "--time", "0", self.name)

    async def start(self) -> None:
        await podman(self.env, "start", self.name)


@asynccontextmanager
async def running_container(
    env: dict[str, str], *mounts: Path, name: str = "", codex: bool = True
) -> AsyncIterator[Container]:
    """A container of the test image, ``sleep infinity``, with the Codex vendor folder at
    :data:`CODEX_DIR` (unless not ``codex``) and each of ``mounts`` at its own path;
    removed at the end, always."""
    name = name or f"cab-test-{uuid.uuid4().hex[:10]}"
    volumes = [f"{vendor_folder()}:{CODEX_DIR}:ro"] if codex else []
    volumes += [f"{path}:{path}" for path in mounts]
    argv = ["run", "-d", "--name", name]
    for volume in volumes:
        argv += ["-v", volume]
    try:
        await podman(env, *argv, IMAGE, "sleep", "infinity")
        yield Container(name, env)
    finally:
        with trio.CancelScope(shield=True):
            await podman(env, "rm", "-f", "--time", "0", name, check=False)
