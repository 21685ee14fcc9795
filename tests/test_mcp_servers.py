"""The MCP servers a session uses, told to the user in words (engine only): servers the
bridge leaves out, servers that fail to start, and the OAuth sign-in Codex asks for.

The Codex messages are 0.171's (``mcpServer/startupStatus/updated`` names its thread;
tests/test_e2e_mcp_servers.py has the real thing).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tests.support.engine_harness import Harness
from tests.test_codex_experimental import assert_valid
from tests.test_config import H, open_session
from tests.test_lifecycle import (
    CWD,
    SSE,
    STDIO,
    THREAD,
    Recorder,
    answer,
    initialize,
    resume_result,
    stored_thread,
    validate_all,
)
from tests.test_v2 import V2

ACP_SERVER = {"type": "acp", "name": "in-editor", "id": "x"}
NOTICES: dict[str, Any] = {"session": {"notices": {}}}


def status(
    h: Harness, name: str, state: str, *, thread: str = THREAD, **fields: Any
) -> list[dict[str, Any]]:
    """Codex's ``mcpServer/startupStatus/updated`` for server ``name`` of ``thread``."""
    params = {
        "threadId": thread,
        "name": name,
        "environmentId": None,
        "status": state,
        "error": None,
        "failureReason": None,
        **fields,
    }
    return h.codex_notify("mcpServer/startupStatus/updated", params)


def fails(
    h: Harness, name: str, error: str, *, auth: str = "unsupported", runtime: str = "failed"
) -> None:
    """Server ``name`` of ``THREAD`` fails to start with ``error``; the bridge looks it up
    (does it want a sign-in?), Codex answers with ``auth`` and ``runtime``."""
    before = len(h.to_codex)
    status(h, name, "failed", error=error)
    [request] = [m for m in h.to_codex[before:] if m.get("method") == "mcpServerStatus/list"]
    assert request["params"] == {
        "threadId": THREAD,
        "serverName": name,
        "detail": "toolsAndAuthOnly",
    }
    listed = {
        "name": name,
        "authStatus": auth,
        "runtimeStatus": runtime,
        "tools": {},
        "resources": [],
        "resourceTemplates": [],
    }
    h.codex_reply(request["id"], {"data": [listed], "nextCursor": None})


def new_session(h: Harness, servers: list[Any] | None = None, thread: str = THREAD) -> int:
    rid = h.client_request("session/new", {"cwd": CWD, "mcpServers": servers or []})
    start = h.codex_request("thread/start")
    h.codex_reply(start["id"], {"thread": {"id": thread, "cwd": CWD}, "model": "mock"})
    return rid


def told(h: Harness, session: str = THREAD) -> list[str]:
    """What the user was told in words on ``session``: notices (title: description) and
    agent messages or thoughts."""
    out = []
    for update in h.updates(session):
        kind = update["sessionUpdate"]
        if kind == "notice":
            description = update.get("description")
            out.append(f"{update['title']}: {description}" if description else update["title"])
        elif kind in ("agent_message_chunk", "agent_thought_chunk"):
            out.append(update["content"]["text"])
    return out


def after_answer(h: Harness, rid: int, session: str = THREAD) -> list[dict[str, Any]]:
    """The updates of ``session`` sent after the answer to ``rid``."""
    answer_at = next(
        i for i, m in enumerate(h.to_client) if m.get("id") == rid and "method" not in m
    )
    return [
        m["params"]["update"]
        for m in h.to_client[answer_at:]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session
    ]


# -- servers left out ---------------------------------------------------------------------


def open_with(h: Recorder, method: str, servers: list[Any]) -> int:
    """Open session ``THREAD`` (``session/new`` opens a new thread of that id) naming
    ``servers``; every Codex request of the open answered."""
    if method == "session/new":
        return new_session(h, servers)
    rid = h.client_request(method, {"sessionId": THREAD, "cwd": CWD, "mcpServers": servers})
    answer(h, "thread/read", {"thread": stored_thread([])})
    if method == "session/fork":
        fork = h.codex_request("thread/fork")
        h.codex_reply(fork["id"], resume_result(THREAD + "-fork"))
    else:
        answer(h, "thread/resume", resume_result())
    return rid


@pytest.mark.parametrize(
    "method", ["session/new", "session/load", "session/resume", "session/fork"]
)
def test_a_server_codex_cannot_carry_is_told_after_the_open_is_answered(method: str) -> None:
    h = Recorder()
    initialize(h, {"subagents": {}})  # fork is unstable: offered to such a client
    rid = open_with(h, method, [STDIO, SSE, ACP_SERVER])
    session = THREAD + "-fork" if method == "session/fork" else THREAD
    assert h.result(rid)
    words = told(h, session)
    assert len(words) == 2, words
    assert "MCP server 'old' was left out" in words[0]
    assert "Codex has no SSE transport" in words[0]
    assert "streamable HTTP URL (type http) or a stdio command" in words[0]
    assert "MCP server 'in-editor' was left out: Codex has no 'acp' transport" in words[1]
    # Said after the answer (the client knows the session then), as agent messages: this
    # client takes no notices.
    kinds = [u["sessionUpdate"] for u in after_answer(h, rid, session)]
    assert kinds.count("agent_message_chunk") == 2
    # The stdio server went to Codex all the same.
    codex_method = {"session/new": "thread/start", "session/fork": "thread/fork"}.get(
        method, "thread/resume"
    )
    assert list(h.codex_request(codex_method)["params"]["config"]) == ["mcp_servers.files"]
    validate_all(h, unstable=True)


def test_a_client_that_takes_notices_is_told_with_a_warning_notice() -> None:
    h = Recorder()
    initialize(h, NOTICES)
    rid = new_session(h, [SSE])
    assert h.result(rid)
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "warning"
    assert notice["title"] == "MCP server 'old' was left out"
    assert notice["description"].startswith("Codex has no SSE transport")
    validate_all(h, unstable=True)


def test_servers_codex_carries_are_told_nothing() -> None:
    h = Recorder()
    rid = new_session(h, [STDIO])
    assert h.result(rid) and told(h) == []


def test_v2_refuses_a_transport_codex_cannot_carry_naming_it_and_starts_no_thread() -> None:
    h = V2()
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse"}
    rid = h.client_request("session/new", {"cwd": CWD, "mcpServers": [sse]})
    error = h.error(rid)
    assert error.code == -32602
    assert "mcpServers[0]: MCP server 'old' cannot be used" in error.message
    assert "Codex has no SSE transport" in error.message
    assert not [m for m in h.to_codex if m.get("method") == "thread/start"]
    h.validate()


def test_v2_advertises_stdio_and_http_servers() -> None:
    h = V2()
    assert h.init["capabilities"]["session"]["mcp"] == {"http": {}, "stdio": {}}
    stdio = {"type": "stdio", "name": "files", "command": "/usr/bin/mcp-files", "args": []}
    h.client_request("session/new", {"cwd": CWD, "mcpServers": [stdio]})
    config = h.codex_request("thread/start")["params"]["config"]
    assert config == {"mcp_servers.files": {"command": "/usr/bin/mcp-files", "args": []}}
    h.validate()


# -- servers that fail to start ----------------------------------------------------------------


NOT_LOGGED_IN = "The notes MCP server is not logged in. Run `codex mcp login notes`."
FAILED = "MCP client for `probe` failed to start: No such file or directory (os error 2)"


def test_a_server_that_fails_to_start_is_told_once_with_codexs_reason() -> None:
    h = Recorder()
    rid = new_session(h)
    assert h.result(rid)
    status(h, "probe", "starting")
    fails(h, "probe", FAILED)
    before = len(h.to_codex)
    status(h, "probe", "failed", error=FAILED)  # the same failure again: told once
    assert h.to_codex[before:] == []
    [words] = told(h)
    assert words.startswith("MCP server 'probe' did not start: " + FAILED.rstrip("."))
    assert "its tools are not available in this session" in words
    # Ready meanwhile, then failing again: a new failure, told again.
    status(h, "probe", "ready")
    fails(h, "probe", FAILED)
    assert len(told(h)) == 2
    validate_all(h)


def test_a_failure_while_a_turn_streams_is_a_thought_and_a_notice_where_taken() -> None:
    h = Recorder()
    new_session(h)
    h.start_prompt(THREAD)
    fails(h, "probe", FAILED)
    [update] = [u for u in h.updates(THREAD) if "did not start" in str(u)]
    assert update["sessionUpdate"] == "agent_thought_chunk"

    h = Recorder()
    initialize(h, NOTICES)
    new_session(h)
    fails(h, "probe", FAILED)
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "error" and notice["title"] == "MCP server 'probe' did not start"
    validate_all(h, unstable=True)


def test_a_failure_reported_before_the_session_is_answered_is_told_after_the_answer() -> None:
    h = Recorder()
    rid = h.client_request("session/new", {"cwd": CWD, "mcpServers": []})
    start = h.codex_request("thread/start")
    # Codex reports the thread's servers before its answer to thread/start: held until the
    # thread is a session, then told once the client knows the session.
    status(h, "notes", "failed", error="expired", failureReason="reauthenticationRequired")
    h.codex_reply(start["id"], {"thread": {"id": THREAD, "cwd": CWD}, "model": "mock"})
    assert h.result(rid)
    assert [u["sessionUpdate"] for u in after_answer(h, rid) if "sign in" in str(u)] == [
        "agent_message_chunk"
    ]
    validate_all(h)


def test_a_server_never_signed_in_is_looked_up_and_its_sign_in_offered() -> None:
    # Codex 0.171 says no more than its words of a server never signed in: "not logged
    # in. Run `codex mcp login NAME`"; its status says what it wants.
    h = Recorder()
    new_session(h)
    fails(h, "notes", NOT_LOGGED_IN, auth="notLoggedIn")
    assert told(h) == [f"MCP server 'notes' needs you to sign in: {NOT_LOGGED_IN}\n"]
    assert h.codex_request("mcpServer/oauth/login")["params"] == {
        "name": "notes",
        "threadId": THREAD,
    }
    validate_all(h)


def test_a_subagents_servers_are_its_roots_and_told_there_only() -> None:
    h = V2()
    h.new_session(THREAD, CWD)
    # A sub-agent's thread starts its root's servers again: held until it is placed (the
    # bridge reads it), then not told: the root's own failure is.
    status(h, "probe", "failed", thread="child-1", error=FAILED)
    read = [m for m in h.to_codex if m.get("method") == "thread/read"][-1]
    assert read["params"]["threadId"] == "child-1"
    spawn = {"parent_thread_id": THREAD, "depth": 1, "agent_nickname": "Ada"}
    child = {
        "id": "child-1",
        "cwd": CWD,
        "parentThreadId": THREAD,
        "agentNickname": "Ada",
        "source": {"subAgent": {"thread_spawn": spawn}},
        "status": {"type": "idle"},
        "turns": [],
    }
    h.codex_reply(read["id"], {"thread": child})
    assert "child-1" in h.engine.threads  # placed
    assert not [u for u in h.updates() if "did not start" in str(u)]
    fails(h, "probe", FAILED)
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["title"] == "MCP server 'probe' did not start"
    h.validate()


def test_a_failure_in_a_v2_session_is_a_notice() -> None:
    h = V2()
    h.new_session(THREAD, CWD)
    fails(h, "probe", FAILED)
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["description"].startswith("MCP client for `probe` failed to start")
    h.validate()


def run(h: Harness, text: str) -> int:
    """Prompt ``text`` on session ``THREAD``; the request's id."""
    return h.client_request(
        "session/prompt", {"sessionId": THREAD, "prompt": [{"type": "text", "text": text}]}
    )


# -- sign-in ------------------------------------------------------------------------------------

URL = "http://127.0.0.1:9/authorize?client_id=c&state=s"
REAUTH = "reauthenticationRequired"


def needs_sign_in(h: Harness) -> dict[str, Any]:
    """Codex reports server ``notes`` wants a sign-in; the bridge's ``mcpServer/oauth/login``."""
    status(
        h,
        "notes",
        "failed",
        error="The notes MCP server is not logged in. Run `codex mcp login notes`.",
        failureReason=REAUTH,
    )
    return h.codex_request("mcpServer/oauth/login")


def test_a_server_that_needs_a_sign_in_offers_codexs_page_as_a_url_elicitation() -> None:
    h = Recorder()
    initialize(h, {"elicitation": {"url": {}}, **NOTICES})
    new_session(h)
    login = needs_sign_in(h)
    assert login["params"] == {"name": "notes", "threadId": THREAD}
    assert_valid("McpServerOauthLoginParams", login["params"])  # 0.171's and 0.169's
    [notice] = [u for u in h.updates(THREAD) if u["sessionUpdate"] == "notice"]
    assert notice["title"] == "MCP server 'notes' needs you to sign in"
    h.codex_reply(login["id"], {"authorizationUrl": URL, "loginId": "login-1"})
    [asked] = [m for m in h.to_client if m.get("method") == "elicitation/create"]
    assert asked["params"]["mode"] == "url" and asked["params"]["url"] == URL
    assert asked["params"]["sessionId"] == THREAD
    assert asked["params"]["elicitationId"] == "login-1"
    reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
    h.client_raw(msgspec.json.encode(reply))
    h.codex_notify(
        "mcpServer/oauthLogin/completed",
        {"name": "notes", "success": True, "threadId": THREAD, "loginId": "login-1"},
    )
    [complete] = [m for m in h.to_client if m.get("method") == "elicitation/complete"]
    assert complete["params"] == {"elicitationId": "login-1"}
    assert told(h)[-1] == (
        "Signed in to MCP server 'notes': its tools are available from the next prompt on"
    )
    validate_all(h, unstable=True)


def test_one_sign_in_a_server_is_offered_however_many_sessions_ask() -> None:
    h = Recorder()
    new_session(h)
    new_session(h, thread="thread-two")
    needs_sign_in(h)
    status(h, "notes", "failed", thread="thread-two", error="expired", failureReason=REAUTH)
    assert len([m for m in h.to_codex if m.get("method") == "mcpServer/oauth/login"]) == 1
    # Both sessions are told the server wants a sign-in.
    assert any("needs you to sign in" in words for words in told(h, "thread-two"))


def test_without_url_elicitation_the_page_is_told_in_words_and_a_failed_sign_in_too() -> None:
    h = Recorder()
    new_session(h)
    login = needs_sign_in(h)
    h.codex_reply(login["id"], {"authorizationUrl": URL, "loginId": "login-1"})
    assert not [m for m in h.to_client if m.get("method") == "elicitation/create"]
    assert any(URL in words and "Sign in to MCP server 'notes'" in words for words in told(h))
    h.codex_notify(
        "mcpServer/oauthLogin/completed",
        {"name": "notes", "success": False, "error": "access denied", "threadId": THREAD},
    )
    assert told(h)[-1] == "Sign-in to MCP server 'notes' failed: access denied\n"
    validate_all(h)


def test_codex_refusing_the_sign_in_is_told_with_the_way_to_try_again() -> None:
    h = Recorder()
    new_session(h)
    login = needs_sign_in(h)
    h.codex_error(login["id"], "OAuth login is not supported for this server.")
    assert told(h)[-1] == (
        "Codex cannot sign in to MCP server 'notes': OAuth login is not supported for this "
        "server; try again with /mcp login notes\n"
    )


def test_mcp_login_starts_the_sign_in_and_answers_with_its_page() -> None:
    h = H()
    open_session(h, thread_id=THREAD)
    rid = run(h, "/mcp login notes")
    login = h.codex_request("mcpServer/oauth/login")
    assert login["params"] == {"name": "notes", "threadId": THREAD}
    h.codex_reply(login["id"], {"authorizationUrl": URL, "loginId": "login-2"})
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert any(URL in words and "Sign in to MCP server `notes`" in words for words in told(h))
    h.codex_notify(
        "mcpServer/oauthLogin/completed", {"name": "notes", "success": True, "loginId": "login-2"}
    )
    assert "Signed in to MCP server 'notes'" in told(h)[-1]
    h.validate()


def test_mcp_names_a_server_that_wants_a_sign_in_and_the_command_for_it() -> None:
    h = H()
    open_session(h, thread_id=THREAD)
    rid = run(h, "/mcp")
    listed = {
        "name": "notes",
        "authStatus": "notLoggedIn",
        "runtimeStatus": "authenticationRequired",
        "tools": {},
        "resources": [],
        "resourceTemplates": [],
    }
    request = h.codex_request("mcpServerStatus/list")
    h.codex_reply(request["id"], {"data": [listed], "nextCursor": None})
    assert h.result(rid) == {"stopReason": "end_turn"}
    assert "sign in with `/mcp login notes`" in told(h)[-1]


def test_mcp_takes_login_name_and_nothing_else() -> None:
    h = H()
    open_session(h, thread_id=THREAD)
    error = h.error(run(h, "/mcp everything"))
    assert error.code == -32602 and "login NAME" in error.message
