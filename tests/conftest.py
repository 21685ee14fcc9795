"""Fixtures shared by the end-to-end tests: the real Codex, the scripted model, the bridge."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.codex.versions import PINNED
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.shell.codex_transport import ENV_CODEX_BIN, PINNED_CODEX
from tests.support.codex_home import CodexHomeTemplate, lsb_release_stub, make_codex_home_template
from tests.support.daemon import StartDaemon, running_daemon
from tests.support.e2e import (
    SCENARIO_SECONDS,
    TRANSPORTS,
    Conversation,
    OpenConversation,
    Transport,
    bridge_conversation,
    bridge_transport,
    watchdog,
)

#: The suite on several workers (the order each runs its tests in).
pytest_plugins = ["tests.support.parallel"]

REPO = Path(__file__).resolve().parents[1]

#: The oldest Codex in the tested range, installed by scripts/setup in a folder of its own.
OLDEST = "0.169.0"
OLDEST_CODEX = REPO / "tools" / "codex-0.169" / "node_modules" / ".bin" / "codex"
#: Version → binary, for the tests marked ``codex_versions``.
CODEX_INSTALLS = {PINNED: PINNED_CODEX, OLDEST: OLDEST_CODEX}


#: How much of a failed end-to-end test's bridge log its report shows (the end of it).
LOG_TAIL = 6000


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test that ran a bridge shows the end of the bridge's log (``stderr_file``):
    on CI, where its temporary folder is gone by the time anyone reads the report."""
    outcome = yield
    report = outcome.get_result()
    funcargs = getattr(item, "funcargs", {})
    path = funcargs.get("stderr_file")
    if report.failed and call.when == "call" and isinstance(path, Path) and path.exists():
        text = path.read_text(errors="replace")
        if text.strip():
            report.sections.append(("bridge log (its end)", text[-LOG_TAIL:]))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"transports(*names): the test's bridge reached Codex each of these ways {TRANSPORTS} "
        "(the ``transport`` fixture; stdio alone when unmarked)",
    )
    config.addinivalue_line(
        "markers",
        "acp_versions(*versions): the test's client speaks each of these ACP versions "
        "(the ``acp_version`` fixture; 1 alone when unmarked)",
    )
    config.addinivalue_line(
        "markers", "conversation(**options): how the ``conversation`` fixture opens its bridge"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``codex_versions`` runs against each end of the tested range (the test
    id names the version); every other test against the pinned Codex alone. A test marked
    ``transports`` or ``acp_versions`` with more than one value runs once for each."""
    if "codex_bin" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "codex_versions"
    ):
        metafunc.parametrize(
            "codex_bin", list(CODEX_INSTALLS), indirect=True, ids=lambda v: f"codex-{v}"
        )
    for fixture, marker, ids in (
        ("transport", "transports", str),
        ("acp_version", "acp_versions", lambda v: f"v{v}"),
    ):
        mark = metafunc.definition.get_closest_marker(marker)
        if fixture in metafunc.fixturenames and mark is not None and len(mark.args) > 1:
            metafunc.parametrize(fixture, mark.args, indirect=True, ids=ids)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The oldest Codex runs a test's plain route only: what the daemon adds does not depend
    on the Codex version, and the whole suite has to stay fast."""
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params is not None else {}
        daemon = params.get("route") == "daemon" or params.get("transport") == "daemon"
        if params.get("codex_bin") == OLDEST and daemon:
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


@pytest.fixture(scope="session")
def node() -> str:
    """Node, with the pinned ACP SDK installed beside it (the SDK-driven tests' client)."""
    path = shutil.which("node")
    sdk = REPO / "tools" / "node" / "node_modules" / "@agentclientprotocol" / "sdk"
    if path is None or not sdk.exists():
        pytest.fail(
            "node and the pinned ACP SDK are needed: run the project's setup (scripts/setup)"
        )
    return path


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


@pytest.fixture(scope="session", autouse=True)
def lsb_release_on_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every process of the session finds :func:`tests.support.codex_home.lsb_release_stub`'s
    ``lsb_release`` first on ``PATH``: the same answer, for a tenth of the CPU, to what each
    Codex start asks twice."""
    stub = lsb_release_stub(tmp_path_factory.mktemp("lsb-release"))
    with pytest.MonkeyPatch.context() as patch:
        if stub is not None:
            patch.setenv("PATH", os.pathsep.join([str(stub), os.environ.get("PATH", "")]))
        yield


@pytest.fixture(scope="session")
def codex_home_templates(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], CodexHomeTemplate]:
    """``codex_home_templates(codex_bin)``: the home that binary has started on once, made the
    first time a test of this worker asks (see :mod:`tests.support.codex_home`)."""
    made: dict[str, CodexHomeTemplate] = {}

    def template(codex_bin: str) -> CodexHomeTemplate:
        if codex_bin not in made:
            directory = tmp_path_factory.mktemp("codex-home-template")
            made[codex_bin] = make_codex_home_template(codex_bin, directory)
        return made[codex_bin]

    return template


@pytest.fixture
def codex_home(
    tmp_path: Path,
    scripted_model: ScriptedModel,
    codex_bin: str,
    codex_home_templates: Callable[[str], CodexHomeTemplate],
) -> Path:
    """The test's own ``CODEX_HOME``: what ``codex_bin`` made of a home it started on once
    (its databases and system skills, no thread), and a ``config.toml`` pointing it at the
    test's scripted model."""
    home = tmp_path / "codex-home"
    codex_home_templates(codex_bin).seed(home)
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
    # The machines the test names, none of the user's; their picks stored in the test's.
    env["CODEX_ACP_BRIDGE_MACHINES"] = str(codex_home.parent / "machines.toml")
    env["XDG_STATE_HOME"] = str(codex_home.parent / "state")
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
    request: pytest.FixtureRequest,
    transport_of: Callable[[str], AbstractAsyncContextManager[Transport]],
) -> AsyncIterator[str]:
    """How ``serve`` (``bridge_argv`` with ``bridge_env``) reaches Codex, the test run both
    ways: ``plain``, a Codex of its own; ``daemon``, the Codex of a ``codex-acp-bridge daemon``
    running on the test's runtime directory with the same environment, which ``serve``
    attaches to (checked from its log, ``stderr_file``, at the end)."""
    async with transport_of("stdio" if request.param == "plain" else "daemon"):
        yield request.param


@pytest.fixture
def runtime(bridge_env: dict[str, str]) -> Path:
    """The test's own runtime directory (``bridge_env``'s), where its daemon runs."""
    return Path(bridge_env[ENV_RUNTIME_DIR])


@pytest.fixture
def start_daemon(bridge_env: dict[str, str], runtime: Path, tmp_path: Path) -> StartDaemon:
    """``async with start_daemon(*options) as (process, info)``: ``codex-acp-bridge daemon``
    on ``runtime`` with ``bridge_env`` (its log: ``daemon.log`` in ``tmp_path``)."""
    return functools.partial(running_daemon, bridge_env, runtime, tmp_path / "daemon.log")


@pytest.fixture
def transport_of(
    bridge_argv: list[str],
    bridge_env: dict[str, str],
    codex_bin: str,
    codex_home: Path,
    tmp_path: Path,
    stderr_file: Path,
) -> Callable[[str], AbstractAsyncContextManager[Transport]]:
    """``async with transport_of(name) as transport``: what the transport ``name`` needs
    running, for ``serve`` (``bridge_argv`` with ``bridge_env``) to reach Codex that way."""
    return functools.partial(
        bridge_transport,
        argv=bridge_argv,
        env=bridge_env,
        codex_bin=codex_bin,
        codex_home=codex_home,
        tmp_path=tmp_path,
        stderr_file=stderr_file,
    )


def _marked(request: pytest.FixtureRequest, marker: str, default: Any) -> Any:
    """The fixture's parameter: the one this run of the test has, else the one value of the
    test's ``marker``, else ``default``."""
    if hasattr(request, "param"):
        return request.param
    mark = request.node.get_closest_marker(marker)
    return mark.args[0] if mark is not None else default


@pytest.fixture
async def transport(
    request: pytest.FixtureRequest,
    transport_of: Callable[[str], AbstractAsyncContextManager[Transport]],
) -> AsyncIterator[Transport]:
    """How the bridge reaches Codex (see :func:`tests.support.e2e.bridge_transport`): stdio,
    or the ways the test's ``transports`` marker names, one run each."""
    async with transport_of(_marked(request, "transports", "stdio")) as chosen:
        yield chosen


@pytest.fixture
def acp_version(request: pytest.FixtureRequest) -> int:
    """The ACP version the test's client speaks: 1, or those its ``acp_versions`` marker names."""
    version: int = _marked(request, "acp_versions", 1)
    return version


@pytest.fixture
def open_conversation(
    transport: Transport, acp_version: int, stderr_file: Path, workspace: Path
) -> OpenConversation:
    """``async with open_conversation(**options) as talk``: the bridge of ``transport``, its
    client initialized in ``acp_version`` (or ``version``), a session open in ``workspace``; every message
    validated on the way out (options: :func:`tests.support.e2e.bridge_conversation`)."""

    def start(*, version: int | None = None, **options: Any) -> Any:
        version = acp_version if version is None else version
        return bridge_conversation(transport, version, stderr_file, workspace, **options)

    return start


@pytest.fixture
async def conversation(
    request: pytest.FixtureRequest, open_conversation: OpenConversation
) -> AsyncIterator[Conversation]:
    """A ready conversation for the whole test, which fails after ``SCENARIO_SECONDS``; options
    from the test's ``conversation`` marker (as :func:`tests.support.e2e.bridge_conversation`'s)."""
    mark = request.node.get_closest_marker("conversation")
    options = mark.kwargs if mark is not None else {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog, SCENARIO_SECONDS)
        async with open_conversation(**options) as talk:
            yield talk
        nursery.cancel_scope.cancel()
