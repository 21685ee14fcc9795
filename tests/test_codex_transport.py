"""Finding the Codex to run: npm's launcher replaced by the native binary it would run."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from bridge.shell.codex_transport import codex_launch, spawn_codex

LINUX_X64 = ("linux", "x86_64")
TRIPLE = "x86_64-unknown-linux-musl"


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def npm_layout(
    modules: Path, *, platform_package: bool = True, vendored: bool = False
) -> tuple[Path, Path]:
    """``npm install @openai/codex`` into ``modules``: the ``.bin/codex`` link, and the
    package root."""
    root = modules / "@openai" / "codex"
    _executable(root / "bin" / "codex.js", "#!/usr/bin/env node\n")
    if platform_package:
        _executable(modules / "@openai" / "codex-linux-x64" / "vendor" / TRIPLE / "bin" / "codex")
    if vendored:
        _executable(root / "vendor" / TRIPLE / "bin" / "codex")
    link = modules / ".bin" / "codex"
    link.parent.mkdir(parents=True)
    link.symlink_to(Path("..") / "@openai" / "codex" / "bin" / "codex.js")
    return link, root


def test_npm_launcher_link_runs_the_platform_package_binary_with_the_launchers_env(
    tmp_path: Path,
) -> None:
    link, root = npm_layout(tmp_path / "node_modules")
    env = {"PATH": "/usr/bin", "CODEX_MANAGED_BY_BUN": "1", "KEEP": "me"}
    launch = codex_launch(str(link), env, system=LINUX_X64)
    native = tmp_path / "node_modules" / "@openai" / "codex-linux-x64" / "vendor" / TRIPLE
    assert launch.program == str(native / "bin" / "codex")
    # What bin/codex.js sets: the package root, and one (only one) package manager.
    assert launch.env == {
        "PATH": "/usr/bin",
        "KEEP": "me",
        "CODEX_MANAGED_PACKAGE_ROOT": str(root.resolve()),
        "CODEX_MANAGED_BY_NPM": "1",
    }
    assert env["CODEX_MANAGED_BY_BUN"] == "1"  # the caller's mapping is left alone


def test_the_launcher_script_itself_is_recognised_too(tmp_path: Path) -> None:
    _, root = npm_layout(tmp_path / "lib" / "node_modules")
    launch = codex_launch(str(root / "bin" / "codex.js"), {}, system=LINUX_X64)
    assert launch.program.endswith(f"codex-linux-x64/vendor/{TRIPLE}/bin/codex")


def test_a_global_install_linked_from_another_bin_directory(tmp_path: Path) -> None:
    _, root = npm_layout(tmp_path / "lib" / "node_modules")
    link = tmp_path / "bin" / "codex"
    link.parent.mkdir()
    link.symlink_to(root / "bin" / "codex.js")
    launch = codex_launch(str(link), {}, system=LINUX_X64)
    assert launch.program.endswith(f"codex-linux-x64/vendor/{TRIPLE}/bin/codex")
    assert launch.env["CODEX_MANAGED_PACKAGE_ROOT"] == str(root.resolve())


def test_without_the_platform_package_the_launchers_own_vendor_directory(tmp_path: Path) -> None:
    link, root = npm_layout(tmp_path / "node_modules", platform_package=False, vendored=True)
    launch = codex_launch(str(link), {}, system=LINUX_X64)
    assert launch.program == str(root.resolve() / "vendor" / TRIPLE / "bin" / "codex")


def test_no_native_binary_found_runs_the_launcher_as_it_is(tmp_path: Path) -> None:
    link, _ = npm_layout(tmp_path / "node_modules", platform_package=False)
    env = {"PATH": "/usr/bin"}
    launch = codex_launch(str(link), env, system=LINUX_X64)
    assert (launch.program, launch.env) == (str(link), env)


def test_a_platform_the_launcher_does_not_map_runs_it_as_it_is(tmp_path: Path) -> None:
    link, _ = npm_layout(tmp_path / "node_modules")
    assert codex_launch(str(link), {}, system=("linux", "riscv64")).program == str(link)
    # The package for another platform is not this one's.
    assert codex_launch(str(link), {}, system=("darwin", "arm64")).program == str(link)


def test_a_binary_that_is_no_npm_launcher_runs_as_it_is(tmp_path: Path) -> None:
    native = _executable(tmp_path / "bin" / "codex")
    other = _executable(tmp_path / "elsewhere" / "bin" / "codex.js")  # not under @openai/codex
    for binary in (native, other):
        launch = codex_launch(str(binary), {"A": "b"}, system=LINUX_X64)
        assert (launch.program, launch.env) == (str(binary), {"A": "b"})


def test_a_pnpm_install_is_named_as_the_launcher_names_it(tmp_path: Path) -> None:
    store = tmp_path / "node_modules" / ".pnpm" / "@openai+codex@0.169.0" / "node_modules"
    _, root = npm_layout(store)
    (tmp_path / "node_modules" / "@openai").mkdir(parents=True)
    (tmp_path / "node_modules" / "@openai" / "codex").symlink_to(root)
    (tmp_path / "node_modules" / ".modules.yaml").write_text("layoutVersion: 5\n")
    launch = codex_launch(str(root / "bin" / "codex.js"), {}, system=LINUX_X64)
    assert launch.program.endswith(f"codex-linux-x64/vendor/{TRIPLE}/bin/codex")
    assert launch.env["CODEX_MANAGED_BY_PNPM"] == "1"
    assert "CODEX_MANAGED_BY_NPM" not in launch.env


def test_a_bun_install_is_named_as_the_launcher_names_it(tmp_path: Path) -> None:
    link, _ = npm_layout(tmp_path / "node_modules")
    env = {"npm_config_user_agent": "bun/1.2.0 npm/? node/v22 linux x64"}
    launch = codex_launch(str(link), env, system=LINUX_X64)
    assert launch.env["CODEX_MANAGED_BY_BUN"] == "1"


def test_a_vite_plus_install_is_left_to_its_launcher(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    link, _ = npm_layout(packages / "@openai" / "codex-install" / "node_modules")
    (packages / "@openai" / "codex.json").write_text('{"name": "@openai/codex"}')
    assert codex_launch(str(link), {}, system=LINUX_X64).program == str(link)


@pytest.mark.skipif(sys.platform != "linux", reason="the fake layout is Linux's")
async def test_spawn_codex_runs_the_native_binary_and_logs_which(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    link, root = npm_layout(tmp_path / "node_modules", platform_package=False)
    machine = os.uname().machine
    triple = {"x86_64": TRIPLE, "aarch64": "aarch64-unknown-linux-musl"}.get(machine)
    if triple is None:
        pytest.skip(f"npm ships no Codex for {machine}")
    # The "native binary" says what it was started as, and with what.
    _executable(
        root / "vendor" / triple / "bin" / "codex",
        "#!/bin/sh\n"
        'printf \'{"argv0":"%s","args":"%s","root":"%s","npm":"%s"}\\n\' '
        '"$0" "$*" "$CODEX_MANAGED_PACKAGE_ROOT" "$CODEX_MANAGED_BY_NPM"\n'
        "exec cat >/dev/null\n",
    )
    caplog.set_level(logging.DEBUG, logger="bridge.shell.codex_transport")
    async with spawn_codex(str(link), config_overrides=["model=o3"]) as connection:
        said = msgspec.json.decode(await connection.stream.receive())
    assert said == {
        "argv0": str(root.resolve() / "vendor" / triple / "bin" / "codex"),
        "args": "app-server -c model=o3",
        "root": str(root.resolve()),
        "npm": "1",
    }
    assert f"Codex binary: {said['argv0']}" in caplog.text


class _BuggyStderr:
    """A stderr reader with a bug in it: it raises what no stream raises."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    async def receive(self) -> bytes:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("a bug in the stderr reader")


async def test_a_bug_reading_codexs_stderr_is_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's stderr ends quietly only the ways a pipe ends (closed, broken), and an
    oversized line is skipped; anything else is a bug, and it surfaces instead of being
    retried for ever."""
    from bridge.shell import codex_transport

    codex = _executable(tmp_path / "codex", "#!/bin/sh\necho starting >&2\nexec cat >/dev/null\n")
    from bridge.shell.streams import LineStream as line_stream

    def streams(receive: object, send: object, **kwargs: object) -> object:
        if send is None:  # the stderr pipe, read only
            return _BuggyStderr()
        return line_stream(receive, send, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(codex_transport, "LineStream", streams)
    with trio.fail_after(10), pytest.raises(ExceptionGroup) as caught:
        async with spawn_codex(str(codex)):
            await trio.sleep_forever()
    assert caught.group_contains(RuntimeError, match="a bug in the stderr reader")


async def test_an_oversized_stderr_line_is_skipped_and_the_next_ones_logged(
    tmp_path: Path,
) -> None:
    codex = _executable(
        tmp_path / "codex",
        "#!/bin/sh\nhead -c 1100000 /dev/zero | tr '\\0' x >&2\necho >&2\n"
        "echo 'the line after' >&2\nexec cat >/dev/null\n",
    )
    logged: list[str] = []
    after = trio.Event()

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())
            if logged[-1] == "the line after":
                after.set()

    handler = Lines()
    codex_log = logging.getLogger("codex")
    codex_log.addHandler(handler)
    level = codex_log.level
    codex_log.setLevel(logging.INFO)
    try:
        with trio.fail_after(10):
            async with spawn_codex(str(codex)):
                await after.wait()
    finally:
        codex_log.removeHandler(handler)
        codex_log.setLevel(level)
    assert logged == ["the line after"]
