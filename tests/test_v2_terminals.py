"""ACP v2's terminals: a command's output streamed to a v2 client as the output of a terminal
of the agent's (``terminal_update``, ``terminal_output_chunk``), named by its tool call's
content, live and in a replayed history; a v1 client's commands unchanged.

Every message sent to the v2 client is checked against the v2 schema."""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from bridge.acp import v2
from bridge.engine.core.outbox import Outbox, update_effect
from tests.support.engine_harness import Harness
from tests.test_lifecycle import CWD, THREAD, resume_result, stored_thread
from tests.test_v2 import V2

BASE = {"threadId": "thread-1", "turnId": "turn-1"}
TERMINAL = [{"type": "terminal", "terminalId": "call-1"}]


def command(status: str = "inProgress", **fields: Any) -> dict[str, Any]:
    item = {
        "type": "commandExecution",
        "id": "call-1",
        "command": "/bin/bash -lc 'make test'",
        "cwd": "/work",
        "status": status,
        "commandActions": [{"type": "unknown", "command": "make test"}],
        "processId": "4242",
    }
    return {**item, **fields}


def started(h: Harness, **fields: Any) -> None:
    h.codex_notify("item/started", {**BASE, "item": command(**fields)})


def delta(h: Harness, text: str) -> None:
    h.codex_notify("item/commandExecution/outputDelta", {**BASE, "itemId": "call-1", "delta": text})


def completed(h: Harness, **fields: Any) -> None:
    h.codex_notify("item/completed", {**BASE, "item": command(**fields)})


def ran(*streamed: str, output: str, status: str = "completed", exit_code: int = 0) -> V2:
    """A turn's command that streamed ``streamed`` and ended ``status`` with ``exit_code``,
    Codex's aggregated output ``output``."""
    h = V2.with_turn()
    started(h)
    for text in streamed:
        delta(h, text)
    completed(h, status=status, exitCode=exit_code, aggregatedOutput=output)
    return h


def kinds(h: Harness, session: str = "thread-1") -> list[str]:
    return [u["sessionUpdate"] for u in h.updates(session)]


def of_kind(h: Harness, kind: str, session: str = "thread-1") -> list[dict[str, Any]]:
    return [u for u in h.updates(session) if u["sessionUpdate"] == kind]


def decoded(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [base64.b64decode(c["data"], validate=True) for c in chunks]


def test_a_commands_output_streams_to_its_terminal_chunk_by_chunk_and_ends_with_its_exit() -> None:
    h = V2.with_turn()
    started(h)
    call, terminal = of_kind(h, "tool_call_update")[0], of_kind(h, "terminal_update")[0]
    # The call names its terminal; the terminal says what runs where.
    assert call["toolCallId"] == "call-1" and call["status"] == "in_progress"
    assert call["content"] == TERMINAL
    assert terminal == {
        "sessionUpdate": "terminal_update",
        "terminalId": "call-1",
        "command": "make test",
        "cwd": "/work",
    }
    assert kinds(h).index("tool_call_update") < kinds(h).index("terminal_update")
    for text in ("compiling…\n", "\x1b[32mok\x1b[0m 3 tests\n"):
        delta(h, text)
    chunks = of_kind(h, "terminal_output_chunk")
    assert [c["terminalId"] for c in chunks] == ["call-1", "call-1"]
    assert decoded(chunks) == ["compiling…\n".encode(), b"\x1b[32mok\x1b[0m 3 tests\n"]
    # The output is the terminal's, never the call's text content as well.
    assert len(of_kind(h, "tool_call_update")) == 1
    completed(
        h,
        status="completed",
        exitCode=0,
        aggregatedOutput="compiling…\n\x1b[32mok\x1b[0m 3 tests\n",
        durationMs=12,
    )
    end = of_kind(h, "terminal_update")[-1]
    # Streamed already: the exit only, not the output again.
    assert end == {
        "sessionUpdate": "terminal_update",
        "terminalId": "call-1",
        "exitStatus": {"exitCode": 0},
    }
    final = of_kind(h, "tool_call_update")[-1]
    assert final["status"] == "completed" and final["content"] == TERMINAL
    assert final["rawOutput"]["exitCode"] == 0
    assert kinds(h)[-2:] == ["terminal_update", "tool_call_update"]  # the exit, then the call
    h.validate()


def test_output_never_streamed_is_the_terminals_whole_output_at_the_end() -> None:
    h = ran(output="all at once\n")
    assert not of_kind(h, "terminal_output_chunk")
    end = of_kind(h, "terminal_update")[-1]
    assert base64.b64decode(end["output"]["data"]) == b"all at once\n"
    assert end["exitStatus"] == {"exitCode": 0}
    h.validate()


def test_output_codex_kept_but_never_streamed_replaces_the_streamed_at_the_end() -> None:
    """Codex sometimes drops a command's first output delta; its aggregated output has it."""
    h = ran("second\n", output="first\nsecond\n")
    end = of_kind(h, "terminal_update")[-1]
    assert base64.b64decode(end["output"]["data"]) == b"first\nsecond\n"
    h.validate()


def test_a_failed_command_says_its_exit_code_on_the_terminal_and_in_the_call() -> None:
    h = ran("boom\n", output="boom\n", status="failed", exit_code=2)
    assert of_kind(h, "terminal_update")[-1]["exitStatus"] == {"exitCode": 2}
    final = of_kind(h, "tool_call_update")[-1]
    assert final["status"] == "failed"
    assert final["content"] == [
        *TERMINAL,
        {"type": "content", "content": {"type": "text", "text": "Exit code 2"}},
    ]
    h.validate()


def test_what_is_typed_into_a_command_is_echoed_on_its_terminal() -> None:
    h = V2.with_turn()
    started(h)
    h.codex_notify(
        "item/commandExecution/terminalInteraction",
        {**BASE, "itemId": "call-1", "processId": "4242", "stdin": "y\n"},
    )
    assert decoded(of_kind(h, "terminal_output_chunk")) == [b"y\n"]
    h.validate()


def test_a_command_its_turns_cancel_cut_short_has_exited_unknown_how() -> None:
    h = V2.with_turn()
    started(h)
    delta(h, "working\n")
    h.client_notify("session/cancel", {"sessionId": "thread-1"})
    h.codex_reply(h.codex_request("turn/interrupt")["id"], {})
    h.complete_turn("thread-1", status="interrupted")
    end = of_kind(h, "terminal_update")[-1]
    assert end == {"sessionUpdate": "terminal_update", "terminalId": "call-1", "exitStatus": {}}
    final = of_kind(h, "tool_call_update")[-1]
    assert final["status"] == "failed" and final["content"][0] == TERMINAL[0]
    # The exit, then the call's end, then the work's.
    assert kinds(h)[-3:] == ["terminal_update", "tool_call_update", "state_update"]
    h.validate()


def test_a_file_read_stays_text_content() -> None:
    h = V2.with_turn()
    started(
        h,
        command="/bin/bash -lc 'cat README.md'",
        commandActions=[
            {"type": "read", "command": "cat README.md", "name": "README.md", "path": "README.md"}
        ],
    )
    delta(h, "# Title\n")
    assert not of_kind(h, "terminal_update") and not of_kind(h, "terminal_output_chunk")
    text = of_kind(h, "tool_call_update")[-1]["content"][0]["content"]["text"]
    assert "# Title" in text
    h.validate()


def test_a_v1_clients_commands_are_unchanged() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    started(h)
    delta(h, "out\n")
    completed(h, status="completed", exitCode=0, aggregatedOutput="out\n")
    assert "terminal_update" not in kinds(h) and "terminal_output_chunk" not in kinds(h)
    last = h.updates(sid)[-1]
    assert last["sessionUpdate"] == "tool_call_update"
    assert "out" in last["content"][0]["content"]["text"]


def _replayed(h: V2, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rid = h.client_request(
        "session/resume", {"sessionId": THREAD, "cwd": CWD, "replayFrom": {"type": "start"}}
    )
    h.codex_reply(h.codex_request("thread/read")["id"], {"thread": stored_thread([items])})
    h.codex_reply(h.codex_request("thread/resume")["id"], resume_result())
    response = h.client_response(rid)
    assert response is not None and "result" in response, response
    return [
        m["params"]["update"]
        for m in h.to_client[: h.to_client.index(response)]
        if m.get("method") == "session/update"
    ]


def test_a_replayed_command_is_its_terminal_with_the_output_codex_kept_and_its_exit() -> None:
    h = V2()
    stored = command(status="completed", id="c0", cwd=CWD, exitCode=0, aggregatedOutput="done\n")
    updates = _replayed(h, [stored])
    call, terminal = (
        u for u in updates if u["sessionUpdate"] in ("tool_call_update", "terminal_update")
    )
    assert call["sessionUpdate"] == "tool_call_update" and call["toolCallId"] == "c0"
    assert call["content"] == [{"type": "terminal", "terminalId": "c0"}]
    assert call["status"] == "completed"
    # One snapshot (the output replaces what the client held: a second replay shows it once).
    assert terminal["sessionUpdate"] == "terminal_update" and terminal["terminalId"] == "c0"
    assert terminal["command"] == "make test" and terminal["cwd"] == CWD
    assert base64.b64decode(terminal["output"]["data"]) == b"done\n"
    assert terminal["exitStatus"] == {"exitCode": 0}
    h.validate()


def test_a_replayed_command_without_output_has_no_output_snapshot() -> None:
    h = V2()
    stored = command(status="declined", id="c0", cwd=CWD)
    updates = _replayed(h, [stored])
    terminal = next(u for u in updates if u["sessionUpdate"] == "terminal_update")
    assert "output" not in terminal and terminal["exitStatus"] == {}
    h.validate()


def test_terminal_chunks_of_one_terminal_merge_bytes_while_the_client_is_behind() -> None:
    outbox = Outbox()
    outbox.behind = True
    pieces = [b"caf\xc3", b"\xa9 ", b"\x1b[1m!\x1b[0m\n"]  # a UTF-8 character split in two
    for piece in pieces:
        data = base64.b64encode(piece).decode()
        outbox.put(update_effect("s", v2.TerminalOutputChunk(terminalId="t1", data=data)))
    other = base64.b64encode(b"other").decode()
    outbox.put(update_effect("s", v2.TerminalOutputChunk(terminalId="t2", data=other)))
    sent = []
    while outbox:
        sent += [msgspec.json.decode(d)["params"]["update"] for d in outbox.take(64 * 1024)]
    assert [u["terminalId"] for u in sent] == ["t1", "t2"]
    assert decoded(sent) == [b"".join(pieces), b"other"]
