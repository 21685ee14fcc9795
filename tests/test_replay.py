"""Recorded Codex traffic replayed through the engine: fixtures pin the ACP output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bridge.recording import RecordingError, parse_recording, read_recording, replay
from bridge.recording.format import EndRecord, MessageRecord, encode_record
from tests.support.acp_schema import ConversationValidator
from tests.support.fixture_sets import FIXTURES, PINNED_ONLY, SETS, all_names, set_of
from tests.support.reading import errors_of, session_updates

#: Both sets: the pinned Codex's recordings and the oldest tested one's (``codex-0.169/``).
RECORDINGS = [FIXTURES / f"{name}.codex.jsonl" for name in all_names()]


def _expected(recording: Path) -> Path:
    return recording.with_name(recording.name.removesuffix(".codex.jsonl") + ".acp.jsonl")


@pytest.mark.parametrize("folder", list(SETS), ids=lambda f: f or "pinned")
def test_there_are_fixtures_and_each_has_its_transcript(folder: str) -> None:
    recordings = sorted((FIXTURES / folder).glob("*.codex.jsonl"))
    names = {p.name.removesuffix(".codex.jsonl") for p in recordings}
    assert {
        "streamed_answer",
        "reasoning",
        "cancel_mid_stream",
        "failed_turn",
        "bad_input",
    } <= names
    for recording in recordings:
        assert _expected(recording).exists(), f"{recording.name} has no .acp.jsonl twin"
    transcripts = (FIXTURES / folder).glob("*.acp.jsonl")
    orphans = {p.name.removesuffix(".acp.jsonl") for p in transcripts} - names
    assert not orphans, f"transcripts without a recording: {orphans}"


def test_both_fixture_sets_record_the_same_scenarios() -> None:
    pinned, *others = ({p.name for p in (FIXTURES / folder).glob("*.jsonl")} for folder in SETS)
    newer = {f"{name}.{side}.jsonl" for name in PINNED_ONLY for side in ("acp", "codex")}
    assert newer <= pinned
    for other in others:
        assert other == pinned - newer


@pytest.mark.parametrize(
    "recording", RECORDINGS, ids=lambda p: str(p.relative_to(FIXTURES)).removesuffix(".codex.jsonl")
)
def test_fixture_replays_to_its_transcript_and_every_message_is_valid_acp(recording: Path) -> None:
    loaded = read_recording(recording)
    folder = set_of(str(recording.relative_to(FIXTURES)))
    assert loaded.header.codex == SETS[folder], f"fixtures/{folder} come from Codex {SETS[folder]}"
    if not loaded.header.synthetic:
        assert loaded.header.codexUserAgent, "a real recording names the Codex that made it"
    transcript = replay(loaded)  # the RFD checker runs inside
    assert transcript.text() == _expected(recording).read_text()
    declared = loaded.header.clientCapabilities or {}
    version = loaded.header.acpVersion
    validator = ConversationValidator(
        version=version, unstable=version >= 2 or declared.get("subagents") is not None
    )
    for side, message in transcript.conversation:
        if side == "client":
            validator.client_sent(message)
        else:
            validator.agent_sent(message)


@pytest.mark.parametrize("folder", list(SETS), ids=lambda f: f or "pinned")
def test_fixtures_show_the_behaviours_they_are_named_after(folder: str) -> None:
    """Guard against a re-recording that silently stops covering its scenario."""

    def messages(name: str) -> list[dict[str, Any]]:
        return [
            msgspec.json.decode(line)
            for line in (FIXTURES / folder / f"{name}.acp.jsonl").read_text().splitlines()
        ]

    def kinds(name: str) -> list[str]:
        return [u["update"]["sessionUpdate"] for u in session_updates(messages(name))]

    results = {
        # A prompt's answer, without the tokens its turn used (they vary with each recording).
        name: [
            {k: v for k, v in m["result"].items() if k != "usage"}
            for m in messages(name)
            if "result" in m
        ]
        for name in ("streamed_answer", "cancel_mid_stream")
    }
    assert kinds("streamed_answer").count("agent_message_chunk") == 40
    assert {"stopReason": "end_turn"} in results["streamed_answer"]
    assert "agent_thought_chunk" in kinds("reasoning")
    assert {"stopReason": "cancelled"} in results["cancel_mid_stream"]
    assert {"stopReason": "end_turn"} in results["cancel_mid_stream"], (
        "the session works after the cancel"
    )
    failed = errors_of(messages("failed_turn"))
    assert failed and "stream disconnected" in failed[-1].message
    codes = {error.code for error in errors_of(messages("bad_input"))}
    assert {-32700, -32601, -32602, -32002} <= codes


# -- bad recordings ------------------------------------------------------------------------


def _lines(name: str = "streamed_answer") -> list[bytes]:
    return (FIXTURES / f"{name}.codex.jsonl").read_bytes().splitlines(keepends=True)


def _error(data: bytes) -> RecordingError:
    with pytest.raises(RecordingError) as caught:
        replay(parse_recording(data, "bad.jsonl"))
    return caught.value


def test_a_truncated_recording_is_refused_naming_the_last_line() -> None:
    lines = _lines()
    cut = b"".join(lines[:-1])  # no end record
    error = _error(cut)
    assert error.line == len(lines) - 1 and "truncated" in str(error)
    half = b"".join(lines[:10]) + lines[10][: len(lines[10]) // 2]  # a line cut mid-way
    error = _error(half)
    assert error.line == 11 and "truncated" in str(error)


def test_an_unknown_format_version_is_refused_with_what_to_do() -> None:
    lines = _lines()
    lines[0] = lines[0].replace(b'"version":1', b'"version":99')
    error = _error(b"".join(lines))
    assert error.line == 1 and "version 99" in str(error) and "re-record" in str(error)


def test_a_line_that_is_not_json_is_named() -> None:
    lines = _lines()
    lines[5] = b"{not json at all\n"
    error = _error(b"".join(lines))
    assert error.line == 6 and "not JSON" in str(error)


def test_a_message_codex_never_sends_is_refused() -> None:
    lines = _lines()
    index = next(i for i, line in enumerate(lines) if b"item/agentMessage/delta" in line)
    lines[index] = lines[index].replace(b"item/agentMessage/delta", b"item/agentMessage/telepathy")
    error = _error(b"".join(lines))
    assert error.line == index + 1 and "never sends" in str(error) and "telepathy" in str(error)


def test_a_recording_that_no_longer_matches_the_engine_says_so() -> None:
    lines = _lines()
    index = next(
        i for i, line in enumerate(lines) if b'"dir":"to_codex"' in line and b"thread/start" in line
    )
    lines[index] = lines[index].replace(b"thread/start", b"thread/begin")
    error = _error(b"".join(lines))
    assert error.line == index + 1 and "re-record" in str(error)


def test_an_end_record_with_the_wrong_count_is_refused() -> None:
    lines = _lines()
    lines[-1] = encode_record(EndRecord(t=1.0, messages=3))
    error = _error(b"".join(lines))
    assert "counts 3 messages" in str(error)


def test_malformed_client_bytes_are_kept_as_text_and_replay_as_a_parse_error() -> None:
    recording = read_recording(FIXTURES / "bad_input.codex.jsonl")
    texts = [
        e.record
        for e in recording.entries
        if isinstance(e.record, MessageRecord) and isinstance(e.record.text, str)
    ]
    assert texts, "the malformed line is in the recording"
    first = msgspec.json.decode(replay(recording).lines[0])
    assert first["error"]["code"] == -32700


# -- the command ----------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "replay", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_replay_command_prints_the_transcript_and_checks_it(tmp_path: Path) -> None:
    recording = FIXTURES / "reasoning.codex.jsonl"
    result = _cli(str(recording))
    assert result.returncode == 0, result.stderr
    assert result.stdout == _expected(recording).read_text()
    assert _cli(str(recording), "--check", str(_expected(recording))).returncode == 0

    wrong = tmp_path / "wrong.acp.jsonl"
    wrong.write_text(_expected(recording).read_text().replace("thought3", "thought33", 1))
    result = _cli(str(recording), "--check", str(wrong))
    assert result.returncode == 1
    assert "-" in result.stdout and "thought33" in result.stdout and "thought3 " in result.stdout
    assert "differs" in result.stderr

    assert _cli(str(recording), "--check", str(wrong), "--update").returncode == 0
    assert wrong.read_text() == _expected(recording).read_text()


def test_replay_command_refuses_a_broken_recording_without_a_partial_transcript(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.codex.jsonl"
    broken.write_bytes(b"".join(_lines()[:-1]))
    result = _cli(str(broken))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "broken.codex.jsonl:" in result.stderr and "truncated" in result.stderr
    assert "Traceback" not in result.stderr


def test_v2_fixtures_show_the_v2_life_cycle() -> None:
    """Guard the v2 recordings: answers at insertion, work states, children, replay order."""

    def messages(name: str) -> list[dict[str, Any]]:
        text = (FIXTURES / f"{name}.acp.jsonl").read_text()
        return [msgspec.json.decode(line) for line in text.splitlines()]

    def states(name: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (m["params"]["sessionId"], m["params"]["update"])
            for m in messages(name)
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "state_update"
        ]

    def states_of(name: str, session: str) -> list[str]:
        return [
            u["state"] + ("/" + u["stopReason"] if u.get("stopReason") else "")
            for s, u in states(name)
            if s == session
        ]

    answer = messages("v2_streamed_answer")
    inserted = [m["result"]["messageId"] for m in answer if "messageId" in m.get("result", {})]
    echoed = [
        m["params"]["update"]["messageId"]
        for m in answer
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "user_message"
    ]
    # Codex's user message items name them: the ids history replays them under.
    assert len(set(inserted)) == 2 and echoed == inserted
    root = answer[1]["result"]["sessionId"]
    assert states_of("v2_streamed_answer", root) == ["running", "idle/end_turn"] * 2
    approval = messages("v2_approval")
    root = approval[1]["result"]["sessionId"]
    assert states_of("v2_approval", root) == [
        "running",
        "requires_action",
        "running",
        "idle/end_turn",
    ]
    cancelled = messages("v2_cancel_mid_stream")
    root = cancelled[1]["result"]["sessionId"]
    assert states_of("v2_cancel_mid_stream", root)[:2] == ["running", "idle/cancelled"]
    children = {s for s, _ in states("v2_subagents")} - {
        messages("v2_subagents")[1]["result"]["sessionId"]
    }
    assert len(children) == 3
    for child in children:
        assert states_of("v2_subagents", child) == ["running", "idle/end_turn"]
    root = messages("v2_cancel_child")[1]["result"]["sessionId"]
    [child] = {s for s, _ in states("v2_cancel_child")} - {root}
    assert states_of("v2_cancel_child", child)[-1] == "idle/cancelled"
    assert states_of("v2_cancel_child", root)[-1] == "idle/end_turn"
    resumed = messages("v2_resume_replay")
    answered = next(n for n, m in enumerate(resumed) if m.get("id") == 3)
    before = resumed[answered - 1]["params"]["update"]
    assert before == {"sessionUpdate": "state_update", "state": "idle"}
    assert any(
        m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
        for m in resumed[:answered]
    ), "the resume replayed no history"
    statuses = [
        m["params"]["update"].get("status")
        for m in messages("v2_cancel_command")
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
    ]
    assert "cancelled" in statuses, "tool_call/cancel did not end the command cancelled"
    codes = [m["error"]["code"] for m in messages("v2_negotiation") if "error" in m]
    assert codes == [-32022, -32602, -32601, -32600, -32602]


def test_a_recording_keeps_the_version_a_late_initialize_could_not_change(tmp_path: Path) -> None:
    from bridge.recording.recorder import Recorder

    out = tmp_path / "r.codex.jsonl"
    with out.open("wb") as sink:
        recorder = Recorder(sink, clock=lambda: 0.0, transport="stdio")
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w"}},
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 2}},
        ):
            recorder.message("from_client", msgspec.json.encode(message))
    assert recorder.header.acpVersion == 1
