"""Fixtures shared by the end-to-end tests: the real Codex, the scripted model, the bridge."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from bridge.codex.versions import PINNED
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, PINNED_CODEX
from tests.support.daemon import ATTACHED, running_daemon

#: The suite on several workers (the order each runs its tests in).
pytest_plugins = ["tests.support.parallel"]

REPO = Path(__file__).resolve().parents[1]

#: The oldest Codex in the tested range, installed by scripts/setup in a folder of its own.
OLDEST = "0.169.0"
OLDEST_CODEX = REPO / "tools" / "codex-0.169" / "node_modules" / ".bin" / "codex"
#: Version → binary, for the tests marked ``codex_versions``.
CODEX_INSTALLS = {PINNED: PINNED_CODEX, OLDEST: OLDEST_CODEX}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``codex_versions`` runs against each end of the tested range (the test
    id names the version); every other test against the pinned Codex alone."""
    if "codex_bin" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "codex_versions"
    ):
        metafunc.parametrize(
            "codex_bin", list(CODEX_INSTALLS), indirect=True, ids=lambda v: f"codex-{v}"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The oldest Codex runs a test's plain route only: what the daemon adds does not depend
    on the Codex version, and the whole suite has to stay fast."""
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params is not None else {}
        if params.get("codex_bin") == OLDEST and params.get("route") == "daemon":
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def codex_bin(request: pytest.FixtureRequest) -> str:
    """The real Codex binary: the pinned one, or for a test marked ``codex_versions`` each
    end of the tested range in turn. Its absence fails (never skips) the test."""
    version = getattr(request, "param", PINNED)
    if version == PINNED:
        path = os.environ.get(ENV_CODEX_BIN) or str(PINNED_CODEX)
    else:
        path = str(CODEX_INSTALLS[version])
    if not Path(path).exists():
        pytest.fail(
            f"Codex {version} not found at {path}: run the project's setup (scripts/setup, "
            f"which installs @openai/codex@{PINNED} into tools/node and @openai/codex@{OLDEST} "
            "into tools/codex-0.169)"
        )
    return path


@pytest.fixture(scope="session")
def codex_version(codex_bin: str) -> str:
    """What ``codex_bin`` says its version is (``0.171.0``), for a test that runs against
    each end of the tested range and expects what that version does."""
    out = subprocess.run(
        [codex_bin, "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    found = re.search(r"\d+\.\d+\.\d+", out)
    assert found, out
    return found.group()


@pytest.fixture
async def scripted_model(nursery: trio.Nursery) -> ScriptedModel:
    model: ScriptedModel = await nursery.start(serve_scripted_model)
    return model


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The session's cwd: a folder of its own, outside the Codex home."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def codex_home(tmp_path: Path, scripted_model: ScriptedModel) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir()
    write_codex_home(home, scripted_model.base_url)
    return home


@pytest.fixture
def bridge_env(codex_home: Path, codex_bin: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    env["CODEX_HOME"] = str(codex_home)
    env[ENV_CODEX_BIN] = codex_bin
    # A runtime directory of the test's own: a daemon running elsewhere on the machine
    # is never attached to by accident.
    env[ENV_RUNTIME_DIR] = str(codex_home.parent / "runtime")
    return env


@pytest.fixture
def bridge_argv() -> list[str]:
    return [sys.executable, "-m", "bridge", "serve", "--log-level", "info"]


@pytest.fixture
def stderr_file(tmp_path: Path) -> Path:
    """Where the bridge's logs go, so a failing test can show them."""
    path = tmp_path / "bridge-stderr.log"
    path.touch()
    return path


@pytest.fixture(params=["plain", "daemon"])
async def route(
    request: pytest.FixtureRequest, bridge_env: dict[str, str], tmp_path: Path, stderr_file: Path
) -> AsyncIterator[str]:
    """How ``serve`` (``bridge_argv`` with ``bridge_env``) reaches Codex, the test run both
    ways: ``plain``, a Codex of its own; ``daemon``, the Codex of a ``codex-acp-bridge daemon``
    running on the test's runtime directory with the same environment, which ``serve``
    attaches to (checked from its log, ``stderr_file``, at the end)."""
    if request.param == "plain":
        yield "plain"
        return
    runtime = Path(bridge_env[ENV_RUNTIME_DIR])
    async with running_daemon(bridge_env, runtime, tmp_path / "daemon.log"):
        yield "daemon"
    assert ATTACHED in stderr_file.read_text(), "serve ran through the daemon"
