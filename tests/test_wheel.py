"""The package as users get it: `pipx install codex-acp-bridge`, `uvx codex-acp-bridge`.

The wheel is built from the repository, installed into a fresh virtualenv, and run from a
directory outside the repository with nothing of the repository on the import path: `demo`
(which runs `serve` underneath) must work from the installed files alone.

The wheel is built once and installed once for the whole run, whichever workers draw these
tests (:func:`made_once`); the dependencies are fetched from the index once too, into a uv
cache of the run's own.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from email.parser import Parser
from pathlib import Path

import pytest

from bridge import __version__
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.shell.codex_transport import ENV_CODEX_BIN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
DIST = "codex_acp_bridge"
#: What a build never needs and a wheel must not hold (or that is big, or per-machine).
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "node_modules",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".*_cache",
    ".hypothesis",
)


def run(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end within ``timeout`` s; a failure shows its output."""
    command = " ".join(str(arg) for arg in argv)
    try:
        result = subprocess.run(
            [str(arg) for arg in argv],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        pytest.fail(
            f"`{command}` took more than {timeout} s\n"
            f"--- stdout ---\n{(out or '')[-3000:]}\n--- stderr ---\n{(err or '')[-3000:]}"
        )
    if check and result.returncode != 0:
        pytest.fail(
            f"`{command}` exited {result.returncode}\n"
            f"--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
        )
    return result


def user_env(root: Path) -> dict[str, str]:
    """A user's environment with nothing of this repository in it: no PYTHONPATH, no venv, no
    repository directory on PATH, and HOME, CODEX_HOME, caches and the daemon's runtime
    directory all under ``root`` (so neither the user's setup nor a daemon of theirs is used)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "OPENAI_API_KEY")
        and not key.startswith(("CODEX_", "UV_", "XDG_"))
    }
    env["PATH"] = os.pathsep.join(
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(REPO)
    )
    for name in ("home", "codex-home", "tmp", "runtime"):
        (root / name).mkdir(exist_ok=True)
    env.update(
        HOME=str(root / "home"),
        CODEX_HOME=str(root / "codex-home"),
        TMPDIR=str(root / "tmp"),
        XDG_RUNTIME_DIR=str(root / "runtime"),
        NO_COLOR="1",
    )
    env[ENV_RUNTIME_DIR] = str(root / "runtime" / "codex-acp-bridge")
    return env


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]
) -> Path:
    """What ``make(directory)`` returns, made once for the whole run in a directory of its
    own: the first worker (pytest-xdist) to need it makes it while holding a lock, the others
    wait for it and take what it made. A failed ``make`` leaves nothing: the next one tries."""
    base = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        base = base.parent  # the run's own directory, above each worker's
    directory = base / name
    directory.mkdir(exist_ok=True)
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = directory / ".made"
        if made.exists():
            return Path(made.read_text())
        result = make(directory)
        made.write_text(str(result))
        return result


def uv() -> Path:
    for directory in (Path(sys.executable).parent, *map(Path, os.get_exec_path())):
        if (directory / "uv").is_file():
            return directory / "uv"
    pytest.fail("uv not found: run scripts/setup (uv is in the package's `test` extra)")


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's cache for the run: the dependencies come from the index once, not once a test."""
    return made_once(tmp_path_factory, "uv-cache", lambda directory: directory)


def uv_env(env: dict[str, str], cache: Path) -> dict[str, str]:
    """``env`` for uv: the run's cache, this interpreter (uv would otherwise look for, or
    download, one of its own), and no uv configuration of the user's."""
    return {**env, "UV_CACHE_DIR": str(cache), "UV_PYTHON": sys.executable, "UV_NO_CONFIG": "1"}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once for the run (:func:`made_once`)."""
    return made_once(tmp_path_factory, "wheel-build", build_wheel)


def build_wheel(root: Path) -> Path:
    """The wheel, built from a copy of the repository: an in-tree build would leave build/
    and egg-info in the checkout, and a stale build/lib could slip old files into it."""
    source = root / "source"
    shutil.copytree(REPO, source, ignore=_NOT_COPIED, symlinks=True)
    out = root / "dist"
    run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
            *("--disable-pip-version-check", "-w", out, source),
        ],
        timeout=180,
    )
    (built,) = out.glob(f"{DIST}-*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel: Path, uv_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel (and its dependencies, from the index) installed,
    and compiled to bytecode as pip and pipx leave a package; made once for the run.

    The installer is uv, in a virtualenv made without pip: pip's own installation into the
    virtualenv and its install took some 18 s of CPU, uv's well under one."""

    def install(root: Path) -> Path:
        venv = root / "venv"
        env = uv_env(user_env(root), uv_cache)
        run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=120, env=env, cwd=root)
        python = venv / "bin" / "python"
        run(
            [uv(), "pip", "install", "--compile-bytecode", "--python", python, wheel],
            timeout=300,
            env=env,
            cwd=root,
        )
        return venv

    return made_once(tmp_path_factory, "installed", install)


def test_the_wheel_holds_the_package_and_its_metadata(wheel: Path) -> None:
    assert wheel.name == f"{DIST}-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"{DIST}-{__version__}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()

    # Every module of the package, the scripted model (what `demo` runs) included.
    sources = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "bridge").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sources - names == set(), "modules missing from the wheel"
    assert {"bridge/__init__.py", "bridge/scripted_model/__init__.py", "bridge/py.typed"} <= names
    assert "bridge/scripted_model/server.py" in names
    # The daemon's page, served from the package itself.
    page = {f"bridge/daemon/page/static/{n}" for n in ("index.html", "page.js", "page.css")}
    assert page <= names, "the daemon's page is missing from the wheel"

    # Nothing but the package and its dist-info.
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"bridge", info}, f"unexpected top-level entries: {tops}"
    stray = [n for n in names if {"tests", "fixtures", "node_modules"} & set(n.split("/")[:-1])]
    assert stray == [], f"repository-only files in the wheel: {stray}"
    assert not any(n.endswith((".pyc", ".pyo")) for n in names)
    assert f"{info}/licenses/LICENSE" in names, "the Apache-2.0 text ships with the package"

    assert "[console_scripts]" in entry_points
    assert "codex-acp-bridge = bridge.launch:main" in entry_points

    assert metadata["Name"] == "codex-acp-bridge"
    assert metadata["Version"] == __version__
    assert metadata["Summary"]
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Author"] == "codex-acp-bridge contributors"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "# codex-acp-bridge" in metadata.get_payload()  # the README is the long description
    classifiers = metadata.get_all("Classifier") or []
    for classifier in (
        "Development Status :: 4 - Beta",
        "Environment :: Console",
        "Intended Audience :: Developers",
        "Operating System :: POSIX :: Linux",
        "Operating System :: MacOS",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Software Development",
        "Typing :: Typed",
    ):
        assert classifier in classifiers
    urls: dict[str, str] = {}
    for entry in metadata.get_all("Project-URL") or []:
        label, url = entry.split(",", 1)
        urls[label.strip()] = url.strip()
    assert set(urls) >= {"Homepage", "Repository", "Documentation", "Issues"}
    assert all(url.startswith("https://github.com/") for url in urls.values())
    requires = metadata.get_all("Requires-Dist") or []
    for dependency in ("websockets", "msgspec", "trio", "click"):
        assert any(req.startswith(dependency) and "extra ==" not in req for req in requires)


def test_the_installed_wheel_runs_the_demo_outside_the_repository(
    installed: Path, codex_bin: str, tmp_path: Path
) -> None:
    env = user_env(tmp_path)
    command = installed / "bin" / "codex-acp-bridge"

    where = run(
        [installed / "bin" / "python", "-c", "import bridge; print(bridge.__file__)"],
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    module = Path(where.stdout.strip()).resolve()
    assert module.is_relative_to(installed.resolve()), f"bridge imported from {module}"

    version = run([command, "--version"], timeout=60, env=env, cwd=tmp_path)
    assert version.stdout.strip() == f"codex-acp-bridge, version {__version__}"

    # `demo` runs the scripted model, the real Codex and `serve`, all from the venv.
    result = run([command, "demo", "--codex-bin", codex_bin], timeout=240, env=env, cwd=tmp_path)
    out = result.stdout
    assert f"Connected to codex-acp-bridge {__version__}" in out, out
    assert "you: What are you, and how did this message reach me?" in out, out
    assert "thinking: The user asks what I am." in out, out
    assert "codex: Hello from Codex, speaking the Agent Client Protocol" in out, out
    assert "[stop reason: end_turn" in out, out
    assert not (tmp_path / "codex-home").joinpath("config.toml").exists()  # demo's home is its own


def test_the_installed_wheel_finds_codex_on_path_or_says_what_to_do(
    installed: Path, codex_bin: str, tmp_path: Path
) -> None:
    """Without --codex-bin: `codex` on PATH is used; with none anywhere, the error says how to
    give one (an installed wheel has no pinned copy to fall back on)."""
    command = installed / "bin" / "codex-acp-bridge"
    bare = user_env(tmp_path)
    bare["PATH"] = os.pathsep.join(
        entry for entry in bare["PATH"].split(os.pathsep) if not (Path(entry) / "codex").exists()
    )
    missing = run([command, "demo"], timeout=60, env=bare, cwd=tmp_path, check=False)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "no Codex binary found" in missing.stderr
    assert "--codex-bin" in missing.stderr and ENV_CODEX_BIN in missing.stderr
    # An installed package has no project setup to run: it says how to install Codex.
    assert "npm install -g @openai/codex" in missing.stderr
    assert "tools/node" not in missing.stderr

    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "codex").symlink_to(Path(codex_bin).resolve())
    env = {**bare, "PATH": os.pathsep.join([str(on_path), bare["PATH"]])}
    result = run([command, "demo"], timeout=240, env=env, cwd=tmp_path)
    assert f"in front of {on_path / 'codex'}" in result.stdout, result.stdout
    assert "[stop reason: end_turn" in result.stdout, result.stdout


def _uvx() -> list[str]:
    for directory in (Path(sys.executable).parent, *map(Path, os.get_exec_path())):
        if (directory / "uvx").is_file():
            return [str(directory / "uvx")]
    return [str(uv()), "tool", "run"]


def test_uvx_runs_the_wheel(wheel: Path, uv_cache: Path, tmp_path: Path) -> None:
    env = uv_env(user_env(tmp_path), uv_cache)
    env.update(
        UV_TOOL_DIR=str(tmp_path / "uv-tools"),
        UV_TOOL_BIN_DIR=str(tmp_path / "uv-bin"),
        UV_PYTHON_INSTALL_DIR=str(tmp_path / "uv-python"),
    )
    result = run(
        [*_uvx(), "--from", wheel, "codex-acp-bridge", "--version"],
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert result.stdout.strip() == f"codex-acp-bridge, version {__version__}", result.stderr
