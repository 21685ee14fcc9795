"""A session's other folders (ACP ``additionalDirectories``) in the engine alone: advertised
to v1 and v2 clients, sent to Codex as the thread's ``runtimeWorkspaceRoots`` on new, load,
resume and fork, kept in the session's record (modes, ``/rewind``), and a relative one
refused before anything reaches Codex."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_harness import Harness
from tests.test_lifecycle import (
    CWD,
    THREAD,
    Recorder,
    answer,
    initialize,
    resume_result,
    stored_thread,
    validate_all,
)
from tests.test_v2 import V2

EXTRA = "/data/shared"
OTHER = "/srv/libs"


def started(h: Harness, rid: int, sandbox: Any, roots: list[str]) -> dict[str, Any]:
    """Codex's answer to the ``thread/start`` of request ``rid``, as Codex 0.171 gives it for
    these roots: the thread's folders, and the ones but ``cwd`` among ``writableRoots``."""
    start = h.codex_request("thread/start")
    h.codex_reply(
        start["id"],
        {
            "thread": {"id": "thread-1", "cwd": CWD},
            "model": "mock-model",
            "approvalPolicy": "on-request",
            "sandbox": sandbox,
            "runtimeWorkspaceRoots": roots,
        },
    )
    return h.result(rid)


def workspace_write(*roots: str) -> dict[str, Any]:
    return {
        "type": "workspaceWrite",
        "writableRoots": list(roots),
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    }


# -- advertised --------------------------------------------------------------------------------


def test_v1_initialize_advertises_additional_directories() -> None:
    h = Recorder()
    caps = initialize(h)
    assert caps["sessionCapabilities"]["additionalDirectories"] == {}
    validate_all(h)


def test_v2_initialize_advertises_additional_directories() -> None:
    h = V2()
    assert h.init["capabilities"]["session"]["additionalDirectories"] == {}
    h.validate()


# -- session/new -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_new_sends_the_folders_after_the_cwd_as_the_threads_roots(version: int) -> None:
    h: Harness = Recorder() if version == 1 else V2()
    params: dict[str, Any] = {
        "cwd": CWD,
        "mcpServers": [],
        "additionalDirectories": [EXTRA, OTHER + "/", EXTRA, CWD],
    }
    rid = h.client_request("session/new", params)
    start = h.codex_request("thread/start")["params"]
    # Normalised, each once, the cwd not twice.
    assert start["runtimeWorkspaceRoots"] == [CWD, EXTRA, OTHER]
    assert "sandbox" not in start and "config" not in start  # the user's policies stand
    result = started(h, rid, workspace_write(EXTRA, OTHER), [CWD, EXTRA, OTHER])
    assert h.engine.threads.get("thread-1").life.folders == (EXTRA, OTHER)
    # Codex lists the folders among writableRoots: the mode is still the preset's.
    modes = result["modes"] if version == 1 else None
    if modes is not None:
        assert modes["currentModeId"] == "auto"


def test_new_without_folders_sends_codex_what_it_always_did() -> None:
    h = Harness()
    h.client_request("session/new", {"cwd": CWD, "mcpServers": []})
    assert h.codex_request("thread/start")["params"] == {"cwd": CWD}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("folders", "says"),
    [
        (["relative/dir"], "additionalDirectories[0] must be an absolute path, got 'relative/dir'"),
        ([EXTRA, "./x"], "additionalDirectories[1] must be an absolute path, got './x'"),
        (["/missing"], "additionalDirectories[0] '/missing' is not an existing directory"),
    ],
)
def test_a_relative_or_missing_folder_is_invalid_params_and_nothing_reaches_codex(
    version: int, folders: list[str], says: str
) -> None:
    h: Harness = (
        Recorder(is_directory=lambda p: p != "/missing")
        if version == 1
        else V2(is_directory=lambda p: p != "/missing")
    )
    sent = len(h.to_codex)
    rid = h.client_request(
        "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": folders}
    )
    error = h.error(rid)
    assert error.code == -32602
    assert error.message == f"session/new: {says}"
    assert h.to_codex[sent:] == []


# -- the mode keeps the folders --------------------------------------------------------------


def test_a_mode_change_keeps_the_mode_shown_and_the_folders_in_codex() -> None:
    """Codex keeps a thread's roots whatever sandbox policy a mode sets (0.169 and 0.171):
    the pick sends the preset's policy alone, and Codex's report of it (the folders among
    ``writableRoots``) is taken for that mode, not for the user's own policies."""
    h = Recorder()
    initialize(h)
    rid = h.client_request(
        "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": [EXTRA]}
    )
    assert started(h, rid, workspace_write(EXTRA), [CWD, EXTRA])["modes"]["currentModeId"] == "auto"
    pick = h.client_request("session/set_mode", {"sessionId": "thread-1", "modeId": "read-only"})
    update = h.codex_request("thread/settings/update")
    assert update["params"]["sandboxPolicy"] == {"type": "readOnly"}
    h.codex_reply(update["id"], {})
    assert h.result(pick) == {}
    back = h.client_request("session/set_mode", {"sessionId": "thread-1", "modeId": "auto"})
    update = h.codex_request("thread/settings/update")
    h.codex_reply(update["id"], {})
    assert h.result(back) == {}
    h.codex_notify(
        "thread/settings/updated",
        {
            "threadId": "thread-1",
            "threadSettings": {
                "approvalPolicy": "on-request",
                "sandboxPolicy": workspace_write(EXTRA),
                "model": "mock-model",
            },
        },
    )
    modes = [
        u["currentModeId"]
        for u in h.updates("thread-1")
        if u["sessionUpdate"] == "current_mode_update"
    ]
    assert "config" not in modes
    validate_all(h)


# -- load, resume, fork --------------------------------------------------------------------------


def _open(
    h: Harness, method: str, folders: list[str] | None, reported: list[str]
) -> tuple[int, dict[str, Any]]:
    params: dict[str, Any] = {"sessionId": THREAD, "cwd": CWD, "mcpServers": []}
    if folders is not None:
        params["additionalDirectories"] = folders
    rid = h.client_request(method, params)
    answer(h, "thread/read", {"thread": stored_thread([])})
    codex_method = "thread/fork" if method == "session/fork" else "thread/resume"
    request = h.codex_request(codex_method)
    result = resume_result("t-fork" if method == "session/fork" else THREAD)
    result["runtimeWorkspaceRoots"] = reported
    h.codex_reply(request["id"], result)
    return rid, request["params"]


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/fork"])
def test_load_resume_and_fork_send_the_folders_named_and_the_session_keeps_them(
    method: str,
) -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})
    rid, params = _open(h, method, [EXTRA], [CWD, EXTRA])
    assert params["runtimeWorkspaceRoots"] == [CWD, EXTRA]
    assert "error" not in (h.client_response(rid) or {})
    session = "t-fork" if method == "session/fork" else THREAD
    record = h.engine.threads.get(session)
    assert record.life.folders == (EXTRA,) and not record.life.folders_unsent
    h.start_prompt(session)
    assert "runtimeWorkspaceRoots" not in h.codex_request("turn/start")["params"]
    validate_all(h, unstable=True)


def test_a_load_naming_no_folder_of_a_thread_stored_with_some_sets_none_at_the_next_turn() -> None:
    """ACP: folders left out at a load are none. Codex keeps a thread's roots across its
    restarts, so the first turn replaces them with the session's (its cwd alone)."""
    h = Recorder()
    initialize(h)
    rid, params = _open(h, "session/load", None, [CWD, EXTRA])
    assert "runtimeWorkspaceRoots" not in params  # what a load always sent
    assert "error" not in (h.client_response(rid) or {})
    h.start_prompt(THREAD)
    assert h.codex_request("turn/start")["params"]["runtimeWorkspaceRoots"] == [CWD]
    h.complete_turn(THREAD)
    h.start_prompt(THREAD, turn_id="turn-2")
    assert "runtimeWorkspaceRoots" not in h.codex_request("turn/start")["params"]


def test_a_relative_folder_at_load_is_invalid_params_and_opens_nothing() -> None:
    h = Recorder()
    initialize(h)
    sent = len(h.to_codex)
    rid = h.client_request(
        "session/load",
        {"sessionId": THREAD, "cwd": CWD, "mcpServers": [], "additionalDirectories": ["x"]},
    )
    assert h.error(rid).message.startswith("session/load: additionalDirectories[0] must be")
    assert h.to_codex[sent:] == []
    assert h.engine.threads.get(THREAD) is None


def test_v2_resume_and_fork_send_the_folders() -> None:
    h = V2()
    rid = h.client_request(
        "session/resume", {"sessionId": THREAD, "cwd": CWD, "additionalDirectories": [EXTRA]}
    )
    answer(h, "thread/read", {"thread": stored_thread([])})  # type: ignore[arg-type]
    resume = h.codex_request("thread/resume")
    assert resume["params"]["runtimeWorkspaceRoots"] == [CWD, EXTRA]
    h.codex_reply(resume["id"], resume_result())
    assert "error" not in (h.client_response(rid) or {})
    fork = h.client_request(
        "session/fork", {"sessionId": THREAD, "cwd": CWD, "additionalDirectories": [OTHER]}
    )
    answer(h, "thread/read", {"thread": stored_thread([])})  # type: ignore[arg-type]
    forked = h.codex_request("thread/fork")
    assert forked["params"]["runtimeWorkspaceRoots"] == [CWD, OTHER]
    h.codex_reply(forked["id"], resume_result("t-fork"))
    assert h.result(fork)["sessionId"] == "t-fork"
    assert h.engine.threads.get("t-fork").life.folders == (OTHER,)
    h.validate()


def test_recovery_resumes_a_session_with_its_folders() -> None:
    h = Recorder()
    initialize(h)
    rid = h.client_request(
        "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": [EXTRA]}
    )
    started(h, rid, workspace_write(EXTRA), [CWD, EXTRA])
    h._collect(h.engine.codex_lost("gone"))
    h._collect(h.engine.codex_restarted())
    init = h.codex_request("initialize")
    h.codex_reply(init["id"], {"userAgent": "codex/0.171.0"})
    resume = h.codex_request("thread/resume")
    assert resume["params"]["runtimeWorkspaceRoots"] == [CWD, EXTRA]


# -- Codex's schemas -----------------------------------------------------------------------------


def test_the_params_with_folders_fit_codexs_experimental_schema_at_both_ends() -> None:
    from tests.test_codex_experimental import assert_valid

    h = Recorder()
    initialize(h, {"subagents": {}})
    rid = h.client_request(
        "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": [EXTRA]}
    )
    assert_valid("ThreadStartParams", h.codex_request("thread/start")["params"])
    started(h, rid, workspace_write(EXTRA), [CWD, EXTRA])
    for method, definition in (
        ("session/load", "ThreadResumeParams"),
        ("session/fork", "ThreadForkParams"),
    ):
        _, params = _open(h, method, [EXTRA], [CWD])
        assert_valid(definition, params)
    h.start_prompt(THREAD)
    params = h.codex_request("turn/start")["params"]
    assert params["runtimeWorkspaceRoots"] == [CWD, EXTRA]  # Codex had other roots
    assert_valid("TurnStartParams", params)


# -- machines ------------------------------------------------------------------------------------


def test_with_machines_the_local_environment_names_the_folders() -> None:
    from tests.test_machines import BOX

    h = Harness(machines=[BOX])
    rid = h.client_request(
        "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": [EXTRA]}
    )
    start = h.codex_request("thread/start")["params"]
    here = {"environmentId": "local", "cwd": CWD, "runtimeWorkspaceRoots": [CWD, EXTRA]}
    assert start["environments"] == [here]
    started(h, rid, workspace_write(EXTRA), [CWD, EXTRA])
    h.start_prompt("thread-1")
    assert h.codex_request("turn/start")["params"]["environments"] == [here]


def test_on_a_shared_codex_each_turn_names_the_sessions_folders() -> None:
    """Codex keeps one set of folders a thread. On a Codex other windows share (the
    daemon's) another window may open the thread naming others, and its turn sets them:
    each turn of this session names its own, so it works with them whatever came between."""
    h = Recorder(codex_shared=True)
    initialize(h)
    _open(h, "session/load", [EXTRA], [CWD, EXTRA])
    for n in (1, 2):
        h.start_prompt(THREAD, turn_id=f"turn-{n}")
        *_, start = [m for m in h.to_codex if m.get("method") == "turn/start"]
        assert start["params"]["runtimeWorkspaceRoots"] == [CWD, EXTRA]
        h.complete_turn(THREAD, turn_id=f"turn-{n}")
    validate_all(h)
