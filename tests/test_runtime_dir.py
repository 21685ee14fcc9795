"""The daemon's runtime directory is trusted only when it is this user's alone.

Every reader (``serve``, ``status``, ``doctor``) and the daemon check it first
(:func:`bridge.daemon.runtime.check_dir`): a symbolic link, a directory of another user's,
one open to group or others, one in a folder where another user could replace it, and any
file in it that is a link (symbolic or hard), another user's, open to others or no regular
file are refused, with one line that says what to do. What the daemon writes goes into the
directory it checked, never by its name again. The daemon's token is read in the directory
only, and nothing ``daemon.json`` names is run. Another user preparing the directory, or
the folder it is in: ``test_e2e_runtime_dir.py``.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import trio

from bridge.codex_choice import CodexChoice, ServeOptions, choose_codex
from bridge.daemon.runtime import (
    INFO,
    LOCK,
    PAGE_TOKEN,
    STATUS,
    TOKEN,
    DaemonInfo,
    DaemonMachine,
    RuntimeDirError,
    check_dir,
    codex_home,
    daemon_running,
    hold_lock,
    new_page_token,
    new_token,
    page_address,
    page_url_ok,
    prepare,
    read_info,
    read_status,
    read_token,
    running_daemon,
    write_info,
    write_page_opener,
    write_status,
)
from bridge.machines import ENV_SSH_COMMAND, parse_flag
from bridge.serve import make_links, open_codex
from bridge.shell.codex_transport import ENV_CODEX_BIN, CodexUnavailable
from tests.support.intruder import Listener

#: One run of a command: a Python start and a look at the directory.
COMMAND_SECONDS = 30


def running(directory: Path, **fields: object) -> DaemonInfo:
    """A daemon's ``daemon.json`` in ``directory`` (its lock is the test's to hold)."""
    info = DaemonInfo(pid=os.getpid(), bridgeVersion="x", state="running", **fields)  # type: ignore[arg-type]
    write_info(directory, info)
    return info


def readers(directory: Path) -> dict[str, object]:
    """What each reader of the directory makes of it: its answer, or its refusal's words."""
    info = DaemonInfo(pid=1, bridgeVersion="x", state="running", pageUrl="http://127.0.0.1:1/")
    found: dict[str, object] = {}
    for name, read in (
        ("check_dir", lambda: check_dir(directory)),
        ("daemon_running", lambda: daemon_running(directory)),
        ("running_daemon", lambda: running_daemon(directory)),
        ("read_info", lambda: read_info(directory)),
        ("read_status", lambda: read_status(directory)),
        ("read_token", lambda: read_token(directory)),
        ("page_address", lambda: page_address(directory, info)),
    ):
        try:
            found[name] = read()
        except RuntimeDirError as exc:
            found[name] = str(exc)
    return found


def test_the_daemon_makes_its_directory_private_and_a_missing_one_holds_no_daemon(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "deep" / "runtime"
    assert check_dir(directory) is False
    assert running_daemon(directory) is None and read_status(directory) == []
    assert prepare(directory) == directory
    assert (directory.stat().st_mode & 0o777) == 0o700
    assert check_dir(directory) is True
    running(directory, url="ws://127.0.0.1:1")
    new_token(directory)
    write_status(directory, [{"threadId": "t"}])
    with hold_lock(directory):
        assert running_daemon(directory) is not None
        assert read_status(directory) == [{"threadId": "t"}]
        assert read_token(directory) == (directory / TOKEN).read_text().strip()
    assert prepare(directory) == directory  # once more: it passes the check


def test_a_symlinked_runtime_directory_is_refused_though_it_points_at_a_good_one(
    tmp_path: Path,
) -> None:
    good = prepare(tmp_path / "good")
    running(good, url="ws://127.0.0.1:1")
    new_token(good)
    new_page_token(good)
    link = tmp_path / "link"
    link.symlink_to(good)
    said = (
        f"runtime directory {link} is a symbolic link (to {good}), not a directory; name the "
        "directory itself, or use another runtime directory (--runtime-dir, "
        "$CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    )
    with hold_lock(good):
        assert set(readers(link).values()) == {said}
        with pytest.raises(RuntimeDirError) as refused:
            prepare(link)
        assert str(refused.value) == said
        with pytest.raises(RuntimeDirError), hold_lock(link):
            pass
        assert running_daemon(good) is not None  # the directory itself is fine


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o777])
def test_a_runtime_directory_open_to_others_is_refused_not_made_private(
    tmp_path: Path, mode: int
) -> None:
    directory = prepare(tmp_path / "runtime")
    running(directory)
    with hold_lock(directory):
        directory.chmod(mode)
        said = (
            f"runtime directory {directory} is open to other users (mode {mode:04o}); "
            f"chmod 700 {directory}"
        )
        assert set(readers(directory).values()) == {said}
        with pytest.raises(RuntimeDirError) as refused:
            prepare(directory)
        assert str(refused.value) == said
    # What others may have put there stays: the daemon does not make it private.
    assert (directory.stat().st_mode & 0o777) == mode


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_directory_or_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    directory = prepare(tmp_path / "runtime")
    running(directory)
    os.chown(directory, 4242, 4242)
    [said] = set(readers(directory).values())
    assert said == (
        f"runtime directory {directory} belongs to uid 4242, not you: someone else made it; "
        "remove it (as root), or use another runtime directory (--runtime-dir, "
        "$CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    )
    os.chown(directory, os.getuid(), os.getgid())
    os.chown(directory / INFO, 4242, 4242)
    with pytest.raises(RuntimeDirError) as refused:
        read_info(directory)
    assert str(refused.value) == (
        f"{directory / INFO} belongs to uid 4242, not you; remove it and restart the daemon"
    )


#: Each file of the directory, and the readers that open it.
FILES_READ_BY = [
    (INFO, ("read_info", "running_daemon")),
    (TOKEN, ("read_token",)),
    (PAGE_TOKEN, ("page_address",)),
    (STATUS, ("read_status",)),
    (LOCK, ("daemon_running", "running_daemon")),
]


@pytest.mark.parametrize("link", ["symbolic", "hard"])
@pytest.mark.parametrize(("name", "read_by"), FILES_READ_BY)
def test_a_file_of_the_directory_reached_by_a_link_is_refused(
    tmp_path: Path, link: str, name: str, read_by: tuple[str, ...]
) -> None:
    """A symbolic link to a private file of this user's: refused (a link is followed to
    wherever it points when that file is written or read). A hard link, the same file under
    a name elsewhere (where the system lets another user make one, to a file of this
    user's): refused as a symbolic link is."""
    directory = prepare(tmp_path / "runtime")
    running(directory)
    new_token(directory)
    new_page_token(directory)
    write_status(directory, [])
    with hold_lock(directory):
        elsewhere = tmp_path / "elsewhere"
        if link == "symbolic":
            elsewhere.write_bytes((directory / name).read_bytes())
            elsewhere.chmod(0o600)
            (directory / name).unlink()
            (directory / name).symlink_to(elsewhere)
            said = f"{directory / name} is a symbolic link; remove it and restart the daemon"
        else:
            os.link(directory / name, elsewhere)
            said = (
                f"{directory / name} has 2 hard links (the same file under another name); "
                "remove it and restart the daemon"
            )
        found = readers(directory)
        assert {reader: found[reader] for reader in read_by} == dict.fromkeys(read_by, said)
    if name == LOCK:
        with pytest.raises(RuntimeDirError) as refused, hold_lock(directory):
            pass
        assert str(refused.value) == said


def swap(directory: Path) -> Path:
    """``directory`` renamed away and another put in its place, as whoever may write in its
    folder can do between the daemon's check and its writes: open to everyone, standing for
    another user's (both are refused). Its name is returned."""
    directory.rename(directory.with_name("moved"))
    directory.mkdir()
    directory.chmod(0o777)
    return directory.with_name("moved")


def test_what_the_daemon_writes_goes_only_into_a_directory_it_checked(tmp_path: Path) -> None:
    """Each write checks the directory as it opens it, then creates, writes and renames
    inside what it opened: a directory put in its place after an earlier check gets
    nothing, and the write says why."""
    directory = prepare(tmp_path / "runtime")
    new_token(directory)
    moved = swap(directory)
    said = (
        f"runtime directory {directory} is open to other users (mode 0777); chmod 700 {directory}"
    )
    info = DaemonInfo(pid=1, bridgeVersion="x", state="running")
    for write in (
        lambda: new_token(directory),
        lambda: new_page_token(directory),
        lambda: write_info(directory, info),
        lambda: write_status(directory, [{"threadId": "t"}]),
        lambda: write_page_opener(directory, "http://127.0.0.1:1/?token=secret"),
    ):
        with pytest.raises(RuntimeDirError) as refused:
            write()
        assert str(refused.value) == said
    with pytest.raises(RuntimeDirError), hold_lock(directory):
        pass
    assert list(directory.iterdir()) == []
    assert [p.name for p in moved.iterdir()] == [TOKEN]


def test_a_write_leaves_nothing_beside_and_never_follows_a_planted_name(tmp_path: Path) -> None:
    """Written beside under a new name (created, never opened if it is there), then renamed
    over: a symbolic link where the file was is replaced, not followed."""
    directory = prepare(tmp_path / "runtime")
    target = tmp_path / "target"
    target.write_text("kept\n")
    (directory / INFO).symlink_to(target)
    write_info(directory, DaemonInfo(pid=1, bridgeVersion="x", state="running"))
    assert target.read_text() == "kept\n"
    assert read_info(directory) == DaemonInfo(pid=1, bridgeVersion="x", state="running")
    assert [p.name for p in directory.iterdir()] == [INFO]
    assert stat.S_IMODE((directory / INFO).stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o775, 0o757, 0o722])
def test_a_runtime_directory_in_a_folder_others_can_write_to_is_refused(
    tmp_path: Path, mode: int
) -> None:
    """Without the sticky bit, whoever may write in the folder can rename the directory away
    and put theirs in its place: refused before anything is created or read there."""
    folder = tmp_path / "shared"
    folder.mkdir()
    directory = prepare(folder / "runtime")
    running(directory)

    def said(directory: Path) -> str:
        return (
            f"runtime directory {directory} is in {folder}, which others can write to (mode "
            f"{mode:04o}, without the sticky bit), so they could replace it; chmod go-w "
            f"{folder}, or use another runtime directory (--runtime-dir, "
            "$CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
        )

    with hold_lock(directory):
        folder.chmod(mode)  # opened to others once the daemon runs: refused from then on
        assert set(readers(directory).values()) == {said(directory)}
        with pytest.raises(RuntimeDirError) as refused:
            write_info(directory, DaemonInfo(pid=1, bridgeVersion="x", state="running"))
        assert str(refused.value) == said(directory)
    with pytest.raises(RuntimeDirError) as refused:
        prepare(folder / "new")
    assert str(refused.value) == said(folder / "new")
    assert [p.name for p in folder.iterdir()] == ["runtime"]


@pytest.mark.parametrize("mode", [0o1777, 0o1770, 0o755, 0o700])
def test_a_sticky_or_private_folder_is_fine(tmp_path: Path, mode: int) -> None:
    """As ``/tmp`` is (sticky: only a name's owner may rename it), or a folder of one's own."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(mode)
    directory = prepare(folder / "runtime")
    running(directory, url="ws://127.0.0.1:1")
    new_token(directory)
    with hold_lock(directory):
        assert running_daemon(directory) is not None
        assert read_token(directory)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user takes root")
def test_a_runtime_directory_in_another_users_folder_is_refused(tmp_path: Path) -> None:
    """Its owner may rename what is in it, whatever its mode says (and change that)."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    folder.chmod(0o755)
    os.chown(folder, 4242, 4242)
    directory = folder / "runtime"
    with pytest.raises(RuntimeDirError) as refused:
        prepare(directory)
    assert str(refused.value) == (
        f"runtime directory {directory} is in {folder}, which belongs to uid 4242, so they "
        "could replace it; use another runtime directory (--runtime-dir, "
        "$CODEX_ACP_BRIDGE_RUNTIME_DIR, or $XDG_RUNTIME_DIR)"
    )
    assert list(folder.iterdir()) == []


def test_a_file_open_to_others_or_no_regular_file_is_refused(tmp_path: Path) -> None:
    directory = prepare(tmp_path / "runtime")
    running(directory)
    (directory / INFO).chmod(0o644)
    with pytest.raises(RuntimeDirError) as refused:
        read_info(directory)
    assert str(refused.value) == (
        f"{directory / INFO} is open to other users (mode 0644); chmod 600 {directory / INFO}"
    )
    # A FIFO would hold its reader until someone writes: refused without waiting.
    os.mkfifo(directory / STATUS, 0o600)
    with pytest.raises(RuntimeDirError) as refused:
        read_status(directory)
    assert str(refused.value) == (
        f"{directory / STATUS} is not a regular file; remove it and restart the daemon"
    )


def test_serve_goes_on_without_a_daemon_in_a_directory_it_refuses(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\n")
    codex.chmod(0o755)
    env = {"CODEX_HOME": str(tmp_path / "home"), ENV_CODEX_BIN: str(codex)}
    good = prepare(tmp_path / "runtime")
    running(good, url="ws://127.0.0.1:1", codexBin=str(codex), codexHome=codex_home(env))
    link = tmp_path / "link"
    link.symlink_to(good)
    with hold_lock(good):
        assert choose_codex(ServeOptions(runtime_dir=str(good)), env).daemon == good
        chosen = choose_codex(ServeOptions(runtime_dir=str(link)), env)
    assert chosen.daemon is None and chosen.url is None
    assert chosen.refused.startswith(f"runtime directory {link} is a symbolic link")
    assert chosen.says.startswith(f"Codex: its own, {codex}; {link} not trusted")


async def test_the_daemons_token_is_read_in_its_directory_never_where_daemon_json_points(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    listener = Listener()
    await listener.serve(nursery)
    directory = prepare(tmp_path / "runtime")
    token = new_token(directory).read_text().strip()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("a-secret-of-another-file\n")
    running(directory, url=f"ws://127.0.0.1:{listener.port}", tokenFile=str(elsewhere))
    # The listener is no Codex: the connection fails once it has heard the request.
    with hold_lock(directory), trio.fail_after(10), pytest.raises(CodexUnavailable):
        async with open_codex(ServeOptions(), daemon=directory):
            pass
    [request] = listener.heard
    assert f"authorization: bearer {token}\r\n".lower().encode() in request.lower()
    assert b"a-secret-of-another-file" not in request


def script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


async def test_an_attached_serve_checks_machines_with_its_own_ssh_running_nothing_daemon_json_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine's Codex is compared with the version the daemon's Codex said it is."""
    ran = tmp_path / "ran"
    directory = prepare(tmp_path / "runtime")
    running(
        directory,
        url="ws://127.0.0.1:1",
        codexVersion="codex-cli 0.170.0",
        codexBin=script(tmp_path / "their-codex", f"echo codex >> {ran}; echo codex-cli 0.171.0"),
        sshCommand=[script(tmp_path / "their-ssh", f"echo ssh >> {ran}; echo codex-cli 0.171.0")],
        machines=[DaemonMachine(name="box", url="ssh://devbox/src")],
    )
    ours = script(tmp_path / "our-ssh", "echo codex-cli 0.171.0")
    choice = CodexChoice(directory, "Codex: the daemon's")
    with hold_lock(directory), trio.fail_after(10):
        flagged = make_links(ServeOptions(ssh_command=[ours]), choice)
        monkeypatch.setenv(ENV_SSH_COMMAND, ours)
        from_env = make_links(ServeOptions(), choice)
        for links in (flagged, from_env):
            why = await links.check(links.links["box"])
            assert why is not None and "runs Codex 0.171.0, this machine 0.170.0" in why, why
    assert not ran.exists(), ran.read_text()


def test_an_attached_serve_takes_no_command_and_no_dev_container_from_daemon_json(
    tmp_path: Path,
) -> None:
    """A command machine runs its command here, and a dev container its CLI (which runs
    what the folder's configuration says): only as this process's own configuration
    names them, never as ``daemon.json`` does."""
    folder = tmp_path / "app"
    (folder / ".devcontainer").mkdir(parents=True)
    (folder / ".devcontainer" / "devcontainer.json").write_text('{"image": "x"}')
    published = [
        DaemonMachine(name="pod", url="command:sh -c 'touch /tmp/owned'"),
        DaemonMachine(name="app", url=f"devcontainer://{folder}"),
        DaemonMachine(name="box", url="ssh://devbox/src"),
    ]
    directory = prepare(tmp_path / "runtime")
    running(directory, url="ws://127.0.0.1:1", machines=published)
    choice = CodexChoice(directory, "Codex: the daemon's")
    with hold_lock(directory):
        links = make_links(ServeOptions(), choice)
        assert sorted(links.links) == ["box"]
        mine = [parse_flag(f"app=devcontainer://{folder}")]
        links = make_links(ServeOptions(machines=mine), choice)
        assert sorted(links.links) == ["app", "box"]


def test_a_page_address_is_the_daemon_page_s_own_or_none() -> None:
    for url in (
        "http://127.0.0.1:4242/",
        "http://[::1]:4242/",
        "https://127.0.0.1:8765/",
        "https://0.0.0.0:8765/",
        "https://box.example:8765/",
    ):
        assert page_url_ok(url), url
    for url in (
        "http://evil.example:4242/",
        "http://10.0.0.1:4242/",
        "http://127.0.0.1/",
        "http://127.0.0.1:0/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:4242",
        "http://127.0.0.1:4242/x",
        "http://127.0.0.1:4242/?a=b",
        "http://127.0.0.1:4242/#x",
        "http://me@127.0.0.1:4242/",
        "http://127.0.0.1:4242/ --new-window",
        "--new-window http://127.0.0.1:4242/",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "https://-x.example:1/",
        "https://a b:1/",
        "",
    ):
        assert not page_url_ok(url), url


async def test_status_gives_no_page_address_but_the_daemon_page_s(tmp_path: Path) -> None:
    """Not printed, not opened: a ``pageUrl`` no daemon page has."""
    directory = prepare(tmp_path / "runtime")
    running(directory, pageUrl="http://evil.example:4242/")
    new_page_token(directory)
    opened = tmp_path / "opened"
    browser = f"{sys.executable} -c \"import sys; open('{opened}', 'w').write(sys.argv[1])\" %s"
    env = {**os.environ, "BROWSER": browser}
    argv = [sys.executable, "-m", "bridge", "status", "--runtime-dir", str(directory)]
    with hold_lock(directory), trio.fail_after(COMMAND_SECONDS):
        for flag in ("--url", "--open"):
            done = await trio.run_process(
                [*argv, flag], env=env, capture_stdout=True, capture_stderr=True, check=False
            )
            assert (done.returncode, done.stdout) == (2, b""), done
            assert done.stderr.decode().startswith(
                f"codex-acp-bridge status: {directory / INFO} names the page "
                "'http://evil.example:4242/', not an address the daemon's page has"
            )
    assert not opened.exists()


async def test_the_daemon_refuses_a_symlinked_or_open_runtime_directory(tmp_path: Path) -> None:
    """Exit 2 with the check's line, before Codex is looked for; the directory untouched."""
    good = prepare(tmp_path / "good")
    link = tmp_path / "link"
    link.symlink_to(good)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    daemon = [sys.executable, "-m", "bridge", "daemon", "--no-page"]
    daemon += ["--codex-bin", str(tmp_path / "no-codex")]
    with trio.fail_after(COMMAND_SECONDS):
        for directory, said in (
            (link, f"runtime directory {link} is a symbolic link (to {good}), not a directory"),
            (open_dir, f"runtime directory {open_dir} is open to other users (mode 0755)"),
        ):
            done = await trio.run_process(
                [*daemon, "--runtime-dir", str(directory)],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert done.returncode == 2, done
            assert done.stderr.decode().startswith(f"codex-acp-bridge daemon: {said}; "), done
            assert len(done.stderr.decode().splitlines()) == 1
    assert (open_dir.stat().st_mode & 0o777) == 0o755
    assert list(good.iterdir()) == [] and list(open_dir.iterdir()) == []
