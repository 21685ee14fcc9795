"""End to end: the tokens of a prompt's own turn (v1's answer, v2's ``idle`` state), with
the real Codex and the scripted model, v1 and v2, plain and through the daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation

pytestmark = pytest.mark.e2e

#: One turn, two model requests: a command, then the answer.
TWO_REQUESTS = '@@ call exec_command {"cmd":"echo hi"}\n@@ then\n@@ say done'


async def ended(talk: Conversation, text: str) -> dict[str, Any]:
    """Prompt ``text``: how its work ended (v1's answer, v2's ``idle`` state)."""
    if talk.version == 1:
        result: dict[str, Any] = await talk.prompt(text)
        return result
    _, idle = await talk.client.prompt_v2(talk.sid, text)
    return idle


def context_sizes(talk: Conversation, since: int) -> list[int]:
    """The ``used`` of each ``usage_update`` of the session after the first ``since`` updates."""
    return [
        u["update"]["used"]
        for u in talk.client.updates[since:]
        if u["sessionId"] == talk.sid and u["update"]["sessionUpdate"] == "usage_update"
    ]


@pytest.mark.acp_versions(1, 2)
@pytest.mark.transports("stdio", "daemon")
async def test_the_end_of_a_prompts_work_says_the_tokens_of_its_own_turn(
    open_conversation: OpenConversation,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            first = await ended(talk, "@@ say hi")
            assert first["stopReason"] == "end_turn"
            usage = first["usage"]
            assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0
            assert [usage["totalTokens"]] == context_sizes(talk, 0)  # one model request
            # A turn of two model requests counts both, not only the last.
            at = len(talk.client.updates)
            second = (await ended(talk, TWO_REQUESTS))["usage"]
            sizes = context_sizes(talk, at)
            assert len(sizes) >= 2
            assert second["totalTokens"] > sizes[-1]
            # And a turn counts its own tokens, not the session's so far.
            third = (await ended(talk, "@@ say hi"))["usage"]
            assert third["totalTokens"] < usage["totalTokens"] + second["totalTokens"]


@pytest.mark.acp_versions(1, 2)
@pytest.mark.transports("stdio", "daemon")
async def test_a_cost_codex_cannot_read_is_not_sent(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
    codex_home: Path,
    stderr_file: Path,
) -> None:
    """A thread on OpenAI's provider, signed in with an API key: Codex is asked what the
    thread cost once its turn ends, refuses (it reads that for a ChatGPT sign-in only),
    and the client is told no cost, not a zero."""
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml=f'model_provider = "openai"\nopenai_base_url = "{scripted_model.base_url}"',
    )
    bridge_env["OPENAI_API_KEY"] = "sk-bridge-test-key"
    refusal = "account/usage/read of {} refused"
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            login = "authenticate" if talk.version == 1 else "auth/login"
            assert await talk.client.request(login, {"methodId": "api-key"}) == {}
            first = await ended(talk, "@@ say hi")
            assert first["stopReason"] == "end_turn"
            assert first["usage"]["totalTokens"] > 0
            assert context_sizes(talk, 0), "the context use is shown"
            # Codex is asked once the turn has ended, and refuses.
            while refusal.format(talk.sid) not in stderr_file.read_text():  # noqa: ASYNC110 (polls the log)
                await trio.sleep(0.05)
            await ended(talk, "@@ say again")
    usages = [
        u["update"] for u in talk.client.updates if u["update"]["sessionUpdate"] == "usage_update"
    ]
    assert usages and all("cost" not in u for u in usages)
    # The model was OpenAI's provider, reached with the key.
    assert scripted_model.request_headers
    assert all(
        h.get("authorization") == "Bearer sk-bridge-test-key"
        for h in scripted_model.request_headers
    )
