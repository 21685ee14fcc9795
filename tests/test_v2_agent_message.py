"""ACP v2's ``agent_message`` upsert: an answer streams as chunks under its message id and
ends with the upsert of its whole text under the same id (what Codex completed, as shown),
so a client that missed a chunk, or was shown an answer Codex then withheld, ends up right.
A v1 client's answers are unchanged.

Every message sent to the v2 client is checked against the v2 schema."""

from __future__ import annotations

from typing import Any

from bridge.engine.views import translate
from tests.support.air import declaring
from tests.support.engine_harness import Harness
from tests.test_air_keys import AirV2
from tests.test_answer_display import HIDE, SHOW_ANNOTATED, TEXT, answer_item
from tests.test_v2 import V2

BASE = {"threadId": "thread-1", "turnId": "turn-1"}


def answer(h: Harness, item: dict[str, Any], deltas: list[str]) -> list[dict[str, Any]]:
    """Codex's answer ``item``: started, ``deltas`` streamed, completed; the updates it made."""
    before = len(h.updates("thread-1"))
    begun = {**answer_item(None, item_id=item["id"]), "text": "", "phase": item.get("phase")}
    h.codex_notify("item/started", {**BASE, "item": begun})
    for text in deltas:
        h.codex_notify("item/agentMessage/delta", {**BASE, "itemId": item["id"], "delta": text})
    h.codex_notify("item/completed", {**BASE, "item": item})
    return [u for u in h.updates("thread-1")[before:] if u["sessionUpdate"] != "state_update"]


def upsert(text: str, message_id: str = "msg_1") -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {"sessionUpdate": "agent_message", "messageId": message_id, "content": content}


def chunk(text: str, message_id: str = "msg_1") -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }


def test_a_streamed_answer_ends_with_its_whole_text_as_the_upsert_of_the_same_message() -> None:
    h = V2.with_turn()
    # Codex's completed text is what counts, even where the chunks said less.
    sent = answer(h, answer_item(None), ["the ans", "wer"])
    assert sent == [chunk("the ans"), chunk("wer"), upsert(TEXT)]
    h.validate()


def test_an_answer_completed_without_deltas_is_one_upsert() -> None:
    h = V2.with_turn()
    assert answer(h, answer_item(None), []) == [upsert(TEXT)]
    h.validate()


def test_an_empty_answer_never_streamed_sends_nothing() -> None:
    h = V2.with_turn()
    assert answer(h, answer_item(None, text=""), []) == []


def test_a_note_after_the_answer_is_part_of_its_whole_text() -> None:
    h = V2.with_turn()
    sent = answer(h, answer_item(SHOW_ANNOTATED), [TEXT])
    assert sent == [chunk(TEXT), upsert(f"{TEXT}\n\n{translate.HELPLINE_NOTE}")]
    h.validate()


def test_an_answer_codex_withholds_after_streaming_it_is_replaced_by_the_note() -> None:
    h = V2.with_turn()
    sent = answer(h, answer_item(HIDE), ["the answer"])
    assert sent[-1] == upsert(translate.REPLACEMENT_NOTES["wellbeingPromptHelpline"])
    h.validate()


def test_an_air_clients_upsert_says_the_answers_phase() -> None:
    h = AirV2(declaring())
    h.new_session()
    h.prompt("thread-1")
    h.accept_turn()
    item = {**answer_item(None), "phase": "final_answer"}
    last = answer(h, item, [])[-1]
    assert last["sessionUpdate"] == "agent_message"
    assert last["_meta"]["jetbrains"]["air"]["phase"] == "final_answer"
    h.validate()


def test_a_v1_client_gets_chunks_only() -> None:
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    sent = answer(h, answer_item(None), ["the ans", "wer"])
    assert sent == [chunk("the ans"), chunk("wer")]
    assert sid == "thread-1"
