"""End to end over stdio: a real ACP client, the bridge, the real, pinned Codex, the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation, words
from tests.support.reading import Ended, text_of

pytestmark = pytest.mark.e2e


@pytest.mark.transports("stdio", "websocket")
async def test_a_streamed_answer_arrives_whole_and_in_order(
    open_conversation: OpenConversation,
) -> None:
    """Over stdio (a Codex of the bridge's own) and attached to a running ``codex app-server``
    over WebSocket alike."""
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert talk.init["protocolVersion"] == 1
            assert await talk.prompt("@@ words 300") == Ended({"stopReason": "end_turn"})
            chunks = [
                u["update"]
                for u in talk.client.updates
                if u["update"]["sessionUpdate"] == "agent_message_chunk"
            ]
            assert len(chunks) >= 300, "the answer should stream, not arrive in one piece"
            assert text_of(chunks) == words(300)
            assert len({c["messageId"] for c in chunks}) == 1
            # A second prompt on the same session works the same way.
            assert await talk.prompt("@@ words 5") == Ended({"stopReason": "end_turn"})
            assert talk.text().endswith(words(5))
    assert talk.validated[0] > 300


async def test_reasoning_streams_as_thoughts_before_the_answer(conversation: Conversation) -> None:
    client, sid = conversation.client, conversation.sid
    assert await client.prompt(sid, "@@ reason 6\n@@ words 4") == Ended({"stopReason": "end_turn"})
    kinds = [u["update"]["sessionUpdate"] for u in client.updates]
    assert "agent_thought_chunk" in kinds
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")
    assert len(client.text_of(sid, "agent_thought_chunk").split()) == 6
    assert client.text_of(sid) == words(4)


async def test_cancel_mid_stream_resolves_cancelled_after_codex_confirms(
    conversation: Conversation,
) -> None:
    client, sid = conversation.client, conversation.sid
    outcome: dict[str, object] = {}

    async def prompt() -> None:
        outcome["result"] = await client.prompt(sid, "@@ words 3000 delay_ms=10")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        await client.wait_for(
            lambda m: m.get("method") == "session/update" and len(client.text_of(sid).split()) >= 20
        )
        await client.notify("session/cancel", {"sessionId": sid})
    assert outcome["result"] == Ended({"stopReason": "cancelled"})
    streamed = len(client.text_of(sid).split())
    assert 20 <= streamed < 3000
    # The session is usable after a cancel.
    assert await client.prompt(sid, "@@ words 3") == Ended({"stopReason": "end_turn"})


async def test_a_failed_turn_is_an_error_carrying_codex_message(conversation: Conversation) -> None:
    client, sid = conversation.client, conversation.sid
    with pytest.raises(RpcError) as failure:
        await client.prompt(sid, "@@ words 3\n@@ fail")
    assert failure.value.code == -32603
    assert failure.value.message, "Codex's message is passed on"
    assert failure.value.data["status"] == "failed"
    assert await client.prompt(sid, "@@ words 2") == Ended({"stopReason": "end_turn"})


async def test_prompt_with_resources_and_images_reaches_the_model(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    prompt = [
        {"type": "text", "text": "@@ say seen\n"},
        {"type": "resource_link", "uri": f"file://{workspace}/a.py", "name": "a.py"},
        {
            "type": "resource",
            "resource": {"uri": f"file://{workspace}/b.txt", "text": "BEE-CONTENT"},
        },
        {"type": "image", "data": png, "mimeType": "image/png"},
    ]
    client, sid = conversation.client, conversation.sid
    result = await client.request("session/prompt", {"sessionId": sid, "prompt": prompt})
    assert result == Ended({"stopReason": "end_turn"})
    assert client.text_of(sid) == "seen"
    body = str(scripted_model.requests)
    assert "BEE-CONTENT" in body
    assert "a.py" in body
    assert "data:image/png;base64," in body


async def test_prompts_sent_mid_turn_are_queued_and_answered_in_order(
    conversation: Conversation, scripted_model: ScriptedModel
) -> None:
    """A prompt typed while the agent works is not refused: it runs when the turn ends, each
    prompt with its own answer; a cancel then answers what is still queued ``cancelled``."""
    answers: dict[str, object] = {}
    client, sid = conversation.client, conversation.sid

    async def send(name: str, text: str, sent: trio.Event | None = None) -> None:
        answers[name] = await client.prompt(sid, text, sent=sent)

    async def sent_first(name: str, text: str, nursery: trio.Nursery) -> None:
        """``text`` prompted in the background, once it is written: what follows is behind it."""
        sent = trio.Event()
        nursery.start_soon(send, name, text, sent)
        await sent.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, "first", "@@ words 200 delay_ms=5")
        await client.wait_for(lambda _m: len(client.text_of(sid).split()) >= 10)
        await sent_first("second", "@@ say second answer", nursery)
        nursery.start_soon(send, "third", "@@ say third answer")
    order = [name for name in answers]
    assert order == ["first", "second", "third"], order
    assert all(a == Ended({"stopReason": "end_turn"}) for a in answers.values()), answers
    text = client.text_of(sid)
    assert text.startswith(words(200)) and text.index("second answer") < text.index("third answer")

    # A cancel: the running turn is cancelled once Codex confirms, the queue at once.
    answers.clear()
    before = len(client.text_of(sid))
    mark = len(client.received)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, "long", "@@ words 3000 delay_ms=10")
        await client.wait_for(lambda _m: len(client.text_of(sid)) > before + 50)
        await sent_first("waiting", "@@ say never", nursery)
        await client.notify("session/cancel", {"sessionId": sid})
    assert answers == {
        "waiting": Ended({"stopReason": "cancelled"}),
        "long": Ended({"stopReason": "cancelled"}),
    }
    # On the wire (the client's tasks may wake in any order once both answers are read): the
    # queued prompt, sent second so with the larger request id, is answered first.
    cancelled = [
        m["id"]
        for m in client.received[mark:]
        if m.get("result") == Ended({"stopReason": "cancelled"})
    ]
    assert len(cancelled) == 2 and cancelled[0] > cancelled[1], "the queue is answered first"
    assert "never" not in client.text_of(sid)
    user_turns = [r for r in scripted_model.requests if "@@ say never" in str(r.get("input", ""))]
    assert not user_turns, "a cancelled queued prompt never reached the model"


async def test_a_steer_enters_the_running_turn_and_the_model_answers_it_in_that_turn(
    conversation: Conversation, scripted_model: ScriptedModel
) -> None:
    """``_session/steering`` into a long streamed answer is ``injected``: Codex hands it to the
    model in the same turn (the scripted model answers it), and the one prompt response covers
    both. On an idle session: ``promptRequired`` when asked, else a new turn that streams."""
    answers: dict[str, object] = {}
    client, sid = conversation.client, conversation.sid
    assert conversation.init["_meta"]["steering"] == {"supported": True}

    async def send(name: str, text: str) -> None:
        answers[name] = await client.prompt(sid, text)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, "prompt", "@@ words 300 delay_ms=5")
        await client.wait_for(lambda _m: len(client.text_of(sid).split()) >= 20)
        steered = await client.request(
            "_session/steering",
            {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": "@@ say steered reply"}],
            },
        )
        assert steered == {"outcome": "injected"}
    assert answers == {"prompt": Ended({"stopReason": "end_turn"})}
    text = client.text_of(sid)
    # Codex hands the steer to the model at once: the answer in flight stops where it
    # was, and the model's reply to the steer follows, in the same turn.
    assert text.startswith(words(20)) and text.endswith("steered reply"), text[-300:]

    idle = await client.request(
        "_session/steering",
        {
            "sessionId": sid,
            "prompt": [{"type": "text", "text": "@@ say unused"}],
            "_meta": {"steering": {"idleBehavior": "promptRequired"}},
        },
    )
    assert idle == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    before = client.text_of(sid)
    started = await client.request(
        "_session/steering",
        {"sessionId": sid, "prompt": [{"type": "text", "text": "@@ say a new turn"}]},
    )
    assert started == {"outcome": "startedNewTurn"}
    await client.wait_for(lambda _m: client.text_of(sid).endswith("a new turn"))
    assert client.text_of(sid).startswith(before)
    print(sorted({u["update"]["sessionUpdate"] for u in client.updates}))
    assert all("@@ say unused" not in str(r.get("input", "")) for r in scripted_model.requests)
