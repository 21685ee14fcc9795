"""The one reader of what a session's updates say (bridge/acp/said.py), for the bridge's own
client and the tests."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bridge.acp.said import text_of
from bridge.acp_client import AcpClient


def chunk(text: str, kind: str = "agent_message_chunk", **extra: Any) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}


def test_the_text_of_one_kind_is_its_chunks_in_order() -> None:
    updates = [
        chunk("Hel"),
        chunk("thinking", "agent_thought_chunk"),
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "data": "", "mimeType": "image/png"},
        },
        chunk("lo"),
    ]
    assert text_of(updates) == "Hello"
    assert text_of(updates, "agent_thought_chunk") == "thinking"


def test_one_message_s_text_by_its_id() -> None:
    updates = [chunk("a", messageId="m1"), chunk("b", messageId="m2"), chunk("c", messageId="m1")]
    assert text_of(updates, message_id="m1") == "ac"


def test_a_message_between_sessions_and_a_v2_user_message_say_their_text_blocks() -> None:
    blocks = [{"type": "text", "text": "do "}, {"type": "text", "text": "this"}]
    assert (
        text_of(
            [{"sessionUpdate": "user_message", "messageId": "u", "content": blocks}], "user_message"
        )
        == "do this"
    )


def test_a_v2_agent_message_upsert_replaces_what_its_chunks_said_in_their_place() -> None:
    def upsert(message: str, *texts: str) -> dict[str, Any]:
        blocks = [{"type": "text", "text": t} for t in texts]
        return {"sessionUpdate": "agent_message", "messageId": message, "content": blocks}

    updates = [
        chunk("Hel", messageId="m1"),
        chunk("Other. ", messageId="m2"),
        chunk("o", messageId="m1"),  # "Hello" with a chunk gone astray
        upsert("m1", "Hello", "!"),
        {"sessionUpdate": "agent_message", "messageId": "m2"},  # content left as it was
        upsert("m3", "Whole."),  # never streamed
        chunk(" More.", messageId="m3"),  # chunks after an upsert append
    ]
    assert text_of(updates) == "Hello!Other. Whole. More."
    assert text_of(updates, message_id="m1") == "Hello!"
    assert text_of(updates, "agent_message") == "Hello!Whole."
    assert text_of([*updates, upsert("m2")]) == "Hello!Whole. More."


def test_a_malformed_update_and_a_kind_that_says_nothing_are_errors() -> None:
    with pytest.raises(msgspec.ValidationError):
        text_of([{"sessionUpdate": "agent_message_chunk", "content": 7}])
    with pytest.raises(ValueError, match="tool_call says nothing"):
        text_of([], "tool_call")


def test_the_bridge_s_client_reads_one_session_s_text_with_it() -> None:
    client = AcpClient.__new__(AcpClient)  # only its record of updates is read
    client.updates = [
        {"sessionId": "s1", "update": chunk("mine")},
        {"sessionId": "s2", "update": chunk("theirs")},
        {"sessionId": "s1", "update": chunk(" too")},
    ]
    assert client.text_of("s1") == "mine too"
    assert client.text_of("s2") == "theirs"
