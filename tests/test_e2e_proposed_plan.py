"""Plan mode's proposed plan against the real Codex and the scripted model.

In Plan mode Codex takes the model's ``<proposed_plan>`` block out of its answer as a ``plan``
item. The client is shown it once, whole, as a plan (ACP's ``plan_update`` in Markdown; v1's
only to a client that declared ``plan``, any other sees it as the agent's message), and is
asked "Implement this plan?": implementing switches the session to Default and runs the turn
that carries the plan out; staying in Plan mode changes nothing. Every message the bridge sent
validates against the schema (``open_conversation``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.scripted_model import ScriptedModel
from bridge.scripted_model.directives import codex_internal_purpose
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation

pytestmark = pytest.mark.e2e

PLAN_TEXT = "# Add a greeting\n\n- write hello.txt\n- check it\n"
#: The model's answer in Plan mode: a few words, then the plan in Codex's block.
PROPOSES = "@@ say " + json.dumps(
    f"Here is my plan.\n<proposed_plan>\n{PLAN_TEXT}</proposed_plan>\n"
)


class Answers:
    """The client's side of the question: what it was asked, and what it answers."""

    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.asked: list[tuple[str, Any]] = []
        self.was_asked = trio.Event()

    async def __call__(self, method: str, params: Any) -> Any:
        self.asked.append((method, params))
        self.was_asked.set()
        if method == "elicitation/create":
            return {"action": "accept", "content": {"decision": self.decision}}
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": self.decision}}
        raise AssertionError(f"unexpected request {method}")


def _model_inputs(model: ScriptedModel) -> list[str]:
    """The user's last message in each of the model's requests for a turn (not Codex's own)."""
    return [
        json.dumps(body)
        for body, headers in zip(model.requests, model.request_headers, strict=True)
        if codex_internal_purpose(body, headers) is None
    ]


def _updates(talk: Conversation, kind: str) -> list[dict[str, Any]]:
    return [
        u["update"]
        for u in talk.client.updates
        if u["sessionId"] == talk.sid and u["update"]["sessionUpdate"] == kind
    ]


def _collaboration(talk: Conversation) -> str:
    [option] = [
        o
        for o in _updates(talk, "config_option_update")[-1]["configOptions"]
        if o.get("id", o.get("configId")) == "collaboration_mode"
    ]
    return str(option["currentValue"])


async def _implemented(talk: Conversation) -> None:
    """The turn that carries the plan out: its user message, then the model's answer."""
    client = talk.client

    def said(m: dict[str, Any], kind: str, text: str) -> bool:
        update = (
            m.get("params", {}).get("update", {}) if m.get("method") == "session/update" else {}
        )
        return update.get("sessionUpdate") == kind and text in json.dumps(update)

    asked = await client.wait_for(lambda m: said(m, "user_message_chunk", "Implement the plan."))
    await client.wait_for_index(
        client.received.index(asked), lambda m: said(m, "agent_message_chunk", "ok")
    )


@pytest.mark.acp_versions(1, 2)
@pytest.mark.transports("stdio", "daemon")
async def test_a_proposed_plan_is_a_plan_and_implementing_it_runs_in_default_mode(
    open_conversation: OpenConversation,
    scripted_model: ScriptedModel,
    workspace: Path,
    acp_version: int,
) -> None:
    answers = Answers("implement")
    # v1's plans by id are unstable: its client declares them, and is checked as unstable.
    capabilities = {"plan": {}} if acp_version == 1 else None
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(
            capabilities=capabilities, on_request=answers, unstable=True
        ) as talk:
            await talk.said("/plan")
            said = await talk.said(PROPOSES)
            assert "Here is my plan." in said and "write hello.txt" not in said
            [plan] = _updates(talk, "plan_update")
            assert plan["plan"]["type"] == "markdown"
            assert plan["plan"]["content"] == PLAN_TEXT
            assert not _updates(talk, "plan")  # the todo list is another plan
            await _implemented(talk)
            [(method, question)] = answers.asked
            assert method == "session/request_permission"
            assert question["sessionId"] == talk.sid
            assert _collaboration(talk) == "default"
        inputs = _model_inputs(scripted_model)
        [implementing] = [body for body in inputs if "Implement the plan." in body]
        assert "Collaboration Mode: Default" in implementing
        assert "# Plan Mode" in next(body for body in inputs if "proposed_plan" in body)
        # A load shows the stored plan again, as a plan.
        async with open_conversation(
            session=False, capabilities=capabilities, unstable=True
        ) as reopened:
            opening: dict[str, Any] = {"sessionId": talk.sid, "cwd": str(workspace)}
            if acp_version == 1:
                await reopened.client.request("session/load", {**opening, "mcpServers": []})
            else:  # v2's load: a resume with the history replayed from the start
                opening["replayFrom"] = {"type": "start"}
                await reopened.client.request("session/resume", opening)
            replayed = [
                u["update"]
                for u in reopened.client.updates
                if u["update"]["sessionUpdate"] == "plan_update"
            ]
            assert [p["plan"]["content"] for p in replayed] == [PLAN_TEXT]


async def test_a_client_without_plans_reads_the_plan_and_staying_changes_nothing(
    open_conversation: OpenConversation, scripted_model: ScriptedModel
) -> None:
    """No ``plan`` declared: the plan is the agent's message. Asked by elicitation (declared),
    "stay" leaves the session in Plan mode and starts nothing."""
    answers = Answers("stay")
    capabilities = {"elicitation": {"form": {}}}
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=capabilities, on_request=answers) as talk:
            await talk.said("/plan")
            said = await talk.said(PROPOSES)
            assert said.count("write hello.txt") == 1
            assert not _updates(talk, "plan_update")
            await answers.was_asked.wait()
            [(method, question)] = answers.asked
            assert method == "elicitation/create"
            assert question["message"] == "Implement this plan?"
            await talk.said("@@ say still planning")
            assert _collaboration(talk) == "plan"
    inputs = _model_inputs(scripted_model)
    assert not [body for body in inputs if "Implement the plan." in body]
    assert "# Plan Mode" in next(body for body in inputs if "still planning" in body)


class HeldAnswer(Answers):
    """Answers only once the test lets it (it looks at the session meanwhile)."""

    def __init__(self, decision: str) -> None:
        super().__init__(decision)
        self.release = trio.Event()

    async def __call__(self, method: str, params: Any) -> Any:
        self.asked.append((method, params))
        self.was_asked.set()
        await self.release.wait()
        return await super().__call__(method, params)


def _states(talk: Conversation) -> list[str]:
    return [u["state"] for u in _updates(talk, "state_update")]


@pytest.mark.acp_versions(2)
@pytest.mark.transports("stdio", "daemon")
async def test_v2_the_session_requires_action_while_the_plan_question_waits(
    open_conversation: OpenConversation,
) -> None:
    """After the planning turn's ``idle``: ``requires_action`` while the user is asked (what
    ``session/status`` says too), ``idle`` once answered "stay"; implementing afterwards (a
    second plan, "implement") goes from the question to the implementing turn's work."""
    answers = HeldAnswer("stay")
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(on_request=answers) as talk:
            await talk.said("/plan")
            await talk.said(PROPOSES)
            await answers.was_asked.wait()
            await talk.client.wait_for(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("state") == "requires_action"
                )
            )
            assert _states(talk)[-2:] == ["idle", "requires_action"]
            status = await talk.client.request("session/status", {"sessionId": talk.sid})
            assert status == {"status": "open", "state": {"state": "requires_action"}}
            answers.release.set()
            settled = await talk.client.wait_for(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("status") == "completed"
                    and m["params"]["update"].get("toolCallId", "").endswith("-implement")
                )
            )
            assert _states(talk)[-1] == "idle"
            assert _collaboration(talk) == "plan"
            # Now a second plan, implemented: from the question to the turn's work.
            answers.decision, answers.release = "implement", trio.Event()
            answers.was_asked = trio.Event()
            told = len(_states(talk))
            await talk.said(PROPOSES)
            await answers.was_asked.wait()
            answers.release.set()
            await _implemented(talk)
            await talk.client.wait_for_index(
                talk.client.received.index(settled) + 1,
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("state") == "idle"
                    and m["params"]["update"].get("stopReason") == "end_turn"
                    and len(_states(talk)) >= told + 6
                ),
            )
            assert _states(talk)[told:] == [
                "running",
                "idle",
                "requires_action",
                "idle",
                "running",
                "idle",
            ]
