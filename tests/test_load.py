"""One bridge under concurrent load, against the real Codex: the correctness half of
``bench/many_sessions.py``, at sizes a test can afford.

Many sessions streaming at once, and parents whose sub-agents stream at once, must each get
their own text, whole and exact, on their own session; every prompt must end ``end_turn``; the
RFD transcript checker must find nothing, live or in the recording replayed; and what the
client received must be what the engine sent, or the same once the outbox's coalesced runs of
deltas are merged back. Numbers are printed (``-s`` shows them); none is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bench.many_sessions import Progress, Result, run_many_sessions, run_subagents
from bridge.scripted_model.directives import words_text

pytestmark = [pytest.mark.e2e, pytest.mark.load]

#: Bound for one load test: a hang or a collapse fails with where it was, well before pytest's.
LOAD_SECONDS = 55


def assert_correct(result: Result) -> None:
    """The properties both scenarios promise, each asserted on its own for a clear failure."""
    print(f"\n{result.scenario}:\n{result.report()}")
    assert result.stop_reasons == dict.fromkeys(result.sessions, "end_turn"), result.stop_reasons
    assert result.wrong_text == {}, result.wrong_text
    assert result.checker_violations == [], result.checker_violations
    assert result.replay_matches_live or result.live_is_coalesced_replay, result.problems
    assert result.problems == [], "\n".join(result.problems)


async def test_twenty_sessions_streaming_at_once_each_get_their_whole_text(
    codex_bin: str, tmp_path: Path
) -> None:
    sessions, words = 20, 500
    progress = Progress()
    try:
        with trio.fail_after(LOAD_SECONDS):
            result = await run_many_sessions(
                sessions, words, workdir=tmp_path, codex_bin=codex_bin, progress=progress
            )
    except trio.TooSlowError:
        pytest.fail(
            f"{sessions} sessions x {words} words: not done in {LOAD_SECONDS} s: {progress}"
        )
    assert len(set(result.sessions)) == sessions
    assert result.expected_text == dict.fromkeys(result.sessions, words_text(words))
    assert result.codex_deltas == sessions * words
    assert 0 < result.deltas <= result.codex_deltas
    assert_correct(result)


async def test_eight_parents_with_three_streaming_subagents_each_at_once(
    codex_bin: str, tmp_path: Path
) -> None:
    parents, children, child_words = 8, 3, 500
    progress = Progress()
    try:
        with trio.fail_after(LOAD_SECONDS):
            result = await run_subagents(
                parents,
                children,
                child_words,
                workdir=tmp_path,
                codex_bin=codex_bin,
                progress=progress,
            )
    except trio.TooSlowError:
        pytest.fail(
            f"{parents} parents x {children} sub-agents: not done in {LOAD_SECONDS} s: {progress}"
        )
    assert len(set(result.sessions)) == parents
    # Every child is announced on its own parent's stream, three each, all distinct.
    assert sorted(result.children.values()) == sorted(result.sessions * children)
    assert not set(result.children) & set(result.sessions)
    assert result.expected_text == {
        **{s: f"parent {n} done" for n, s in enumerate(result.sessions)},
        **dict.fromkeys(result.children, words_text(child_words)),
    }
    assert result.codex_deltas >= parents * children * child_words
    assert_correct(result)
