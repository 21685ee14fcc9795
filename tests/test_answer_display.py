"""Answers Codex withholds: an agent message's ``moderation.display`` (Codex 0.171's
versioned union, 0.169's object), shown the same live and in a ``session/load`` replay."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.codex import types as codex_types
from bridge.codex.messages import decode_item
from bridge.engine.views import translate
from tests.support.engine_harness import Harness
from tests.support.reading import text_of
from tests.test_lifecycle import Recorder, load, replayed

TEXT = "the answer itself"
HELPLINE = {"kind": "wellbeingHelpline", "subject": "answer"}

SHOW = {"mode": "show", "version": 1, "trustedContacts": "skip"}
SHOW_ANNOTATED = {**SHOW, "trustedContacts": "check", "annotation": HELPLINE}
HIDE = {"mode": "hide", "version": 1, "replacement": {"kind": "wellbeingPromptHelpline"}}
BLOCK_PROTECTION = {
    "mode": "block",
    "version": 1,
    "reason": {"kind": "protection", "protectionType": "row-7f3a"},
}
BLOCK_CYBER = {"mode": "block", "version": 1, "reason": {"kind": "cyber", "trustedAccess": False}}


def answer_item(display: Any, *, text: str = TEXT, item_id: str = "msg_1") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "agentMessage", "id": item_id, "text": text, "phase": None}
    if display is not None:
        item["moderation"] = {"moderated": True, "display": display}
    return item


def texts(updates: list[dict[str, Any]]) -> list[str]:
    assert all(u["sessionUpdate"] == "agent_message_chunk" for u in updates), updates
    assert all(u["messageId"] == "msg_1" for u in updates), updates
    return [text_of([u]) for u in updates]


def live(item: dict[str, Any], *, deltas: list[str] | None = None, at_start: bool = False) -> Any:
    """The answer's updates in a live turn: ``deltas`` streamed first (``at_start``: the
    item's ``display`` is on its ``item/started`` too), then ``item/completed``."""
    h = Harness()
    sid = h.new_session()
    h.start_prompt(sid)
    base = {"threadId": sid, "turnId": "turn-1"}
    started = item if at_start else answer_item(None, text="", item_id=item["id"])
    h.codex_notify("item/started", {**base, "item": {**started, "text": ""}})
    for delta in deltas or []:
        h.codex_notify("item/agentMessage/delta", {**base, "itemId": item["id"], "delta": delta})
    h.codex_notify("item/completed", {**base, "item": item})
    return texts(h.updates(sid))


def replay(item: dict[str, Any]) -> list[str]:
    h = Recorder()
    rid = load(h, [[item]])
    return texts(replayed(h, rid))


#: display → what the user reads (the answer, then a note of its own, or the note alone).
CASES: list[tuple[str, Any, list[str]]] = [
    ("none", None, [TEXT]),
    ("show", SHOW, [TEXT]),
    ("show-annotated", SHOW_ANNOTATED, [TEXT, "\n\n" + translate.HELPLINE_NOTE]),
    ("hide", HIDE, [translate.REPLACEMENT_NOTES["wellbeingPromptHelpline"]]),
    ("block-protection", BLOCK_PROTECTION, [translate.BLOCK_NOTES["protection"]]),
    ("block-cyber", BLOCK_CYBER, [translate.BLOCK_NOTES["cyber"]]),
    # What the bridge cannot read is withheld, never shown, unless it says show.
    ("unknown-mode", {"mode": "redact", "version": 1, "spans": []}, [translate.WITHHELD_NOTE]),
    ("no-mode", {"version": 1}, [translate.WITHHELD_NOTE]),
    ("not-an-object", "hide", [translate.WITHHELD_NOTE]),
    (
        "hide-v2-new-kind",
        {"mode": "hide", "version": 2, "replacement": {"kind": "x"}},
        [translate.HIDDEN_NOTE],
    ),
    (
        "block-v2",
        {"mode": "block", "version": 2, "reason": {"kind": "cyber"}},
        [translate.BLOCK_NOTES["cyber"]],
    ),
    (
        "block-new-reason",
        {"mode": "block", "version": 1, "reason": {"kind": "x"}},
        [translate.WITHHELD_NOTE],
    ),
    ("block-bad-reason", {"mode": "block", "version": 1, "reason": 7}, [translate.WITHHELD_NOTE]),
    ("show-v2-extra", {"mode": "show", "version": 2, "trustedContacts": "new", "x": 1}, [TEXT]),
    ("show-unreadable", {"mode": "show", "version": "one"}, [TEXT]),
    ("show-new-annotation", {**SHOW, "annotation": {"kind": "newThing"}}, [TEXT]),
    # Codex 0.169's shape.
    ("legacy-show", {"action": "show", "checkTrustedContacts": True}, [TEXT]),
    ("legacy-hide", {"action": "hide"}, [translate.HIDDEN_NOTE]),
    (
        "legacy-block-cyber",
        {"action": "block", "blockType": "cyber", "cyberTrustedAccess": True},
        [translate.BLOCK_NOTES["cyber"]],
    ),
    ("legacy-unknown", {"action": "blur", "blockType": None}, [translate.WITHHELD_NOTE]),
]


@pytest.mark.parametrize(("display", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_answer_that_arrives_whole_reads_the_same_live_and_replayed(
    display: Any, expected: list[str]
) -> None:
    item = answer_item(display)
    assert live(item) == expected
    assert replay(item) == expected


@pytest.mark.parametrize(("display", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_display_known_at_item_started_keeps_a_withheld_answer_from_streaming(
    display: Any, expected: list[str]
) -> None:
    item = answer_item(display)
    streamed = live(item, deltas=["the answer ", "itself"], at_start=True)
    withheld = TEXT not in expected
    if withheld:
        # Not one delta of it went out: the client reads what the replay shows.
        assert streamed == expected
    else:
        assert "".join(streamed) == "".join(expected)
    assert "".join(streamed) == "".join(replay(item))


def test_a_display_that_comes_only_with_the_completion_follows_what_was_streamed() -> None:
    # Streamed text cannot be taken back: what stands in its place follows it.
    streamed = live(answer_item(HIDE), deltas=["the answer ", "itself"])
    assert streamed == [
        "the answer ",
        "itself",
        "\n\n" + translate.REPLACEMENT_NOTES["wellbeingPromptHelpline"],
    ]
    blocked = live(answer_item(BLOCK_CYBER), deltas=[TEXT])
    assert blocked == [TEXT, "\n\n" + translate.BLOCK_NOTES["cyber"]]
    annotated = live(answer_item(SHOW_ANNOTATED), deltas=["the answer ", "itself"])
    assert "".join(annotated) == "".join(replay(answer_item(SHOW_ANNOTATED)))


def test_a_withheld_answer_with_no_text_still_says_so() -> None:
    item = answer_item(BLOCK_PROTECTION, text="")
    assert live(item) == replay(item) == [translate.BLOCK_NOTES["protection"]]


@pytest.mark.parametrize(
    "display",
    [
        SHOW_ANNOTATED,
        HIDE,
        BLOCK_PROTECTION,
        {"action": "block", "blockType": "cyber", "checkTrustedContacts": None, "new": 1},
        {"mode": "whatever", "version": 9},
        None,
    ],
)
def test_every_display_shape_decodes_as_an_agent_message(display: Any) -> None:
    raw = msgspec.json.encode({**answer_item(display), "memoryCitation": None, "new": [1]})
    item = decode_item(msgspec.Raw(raw))
    assert type(item) is codex_types.AgentMessageItem and item.text == TEXT


def test_the_0_169_display_object_decodes_as_it_was() -> None:
    raw = msgspec.json.encode(
        answer_item(
            {
                "action": "block",
                "blockType": "cyber",
                "checkTrustedContacts": False,
                "cyberTrustedAccess": True,
            }
        )
    )
    item = decode_item(msgspec.Raw(raw))
    assert type(item) is codex_types.AgentMessageItem
    assert codex_types.answer_display(item) == codex_types.LegacyDisplay(
        action="block", blockType="cyber", checkTrustedContacts=False, cyberTrustedAccess=True
    )
