"""End to end: modes, config options, slash commands and authentication against the real Codex."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from bridge.scripted_model import ScriptedModel, write_codex_home
from bridge.scripted_model.directives import codex_internal_purpose, turn_metadata
from tests.support.air import declaring
from tests.support.codex_home import openai_key_in_the_environment
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation
from tests.support.loopback import refuse_for_lack_of_a_key, request_head, serve_loopback
from tests.support.reading import Ended

# Version-sensitive: run against both ends of the tested Codex range.
pytestmark = [pytest.mark.e2e, pytest.mark.codex_versions]


def _user_turns(model: ScriptedModel) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The model requests of user turns (not Codex's own: titles, compaction, review)."""
    return [
        (body, headers)
        for body, headers in zip(model.requests, model.request_headers, strict=True)
        if codex_internal_purpose(body, headers) is None
    ]


def _option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == option_id)


def _is_update(kind: str) -> Any:
    return lambda m: (
        m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    )


# -- what a session reports is what config.toml says ----------------------------------------------


@pytest.mark.parametrize(
    ("extra_toml", "mode", "sandbox_mode"),
    [
        ("", "auto", "workspace-write"),  # the test config: on-request + workspace-write
        ('approval_policy = "on-request"\nsandbox_mode = "read-only"', "read-only", "read-only"),
        (
            'approval_policy = "never"\nsandbox_mode = "danger-full-access"',
            "full-access",
            "danger-full-access",
        ),
        (
            'approval_policy = "never"\nsandbox_mode = "workspace-write"',
            "config",
            "workspace-write",
        ),
    ],
)
async def test_a_new_session_reports_the_configured_mode_and_overrides_nothing(
    open_conversation: OpenConversation,
    scripted_model: ScriptedModel,
    codex_home: Path,
    extra_toml: str,
    mode: str,
    sandbox_mode: str,
) -> None:
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra_toml)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            result = talk.opened
            assert result["modes"]["currentModeId"] == mode
            assert _option(result["configOptions"], "mode")["currentValue"] == mode
            model = _option(result["configOptions"], "model")
            assert model["currentValue"] == "mock-model"
            assert await talk.prompt("@@ say fine") == Ended({"stopReason": "end_turn"})
    [(body, headers)] = _user_turns(scripted_model)
    # The turn ran as configured: the bridge sent no setting of its own.
    assert turn_metadata(body, headers)["sandbox_mode"] == sandbox_mode
    assert body["model"] == "mock-model"


async def test_the_first_answer_lists_the_whole_catalog_and_the_configured_effort(
    open_conversation: OpenConversation, scripted_model: ScriptedModel, codex_home: Path
) -> None:
    write_codex_home(
        codex_home,
        scripted_model.base_url,
        extra_toml='model = "gpt-6-luna"\nmodel_reasoning_effort = "high"',
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            options = talk.opened["configOptions"]
            assert _option(options, "model")["currentValue"] == "gpt-6-luna"
            # The whole catalog is in the answer: no update needed to pick another model.
            models = [o["value"] for o in _option(options, "model")["options"]]
            assert "gpt-6-luna" in models and len(models) > 1
            effort = _option(options, "reasoning_effort")
            assert effort["currentValue"] == "high"
            assert "high" in [o["value"] for o in effort["options"]]
            assert await talk.prompt("@@ say fine") == Ended({"stopReason": "end_turn"})
    [(body, _headers)] = _user_turns(scripted_model)
    assert (body["model"], body["reasoning"]["effort"]) == ("gpt-6-luna", "high")


# -- picks reach Codex's turns ------------------------------------------------------------------------


async def test_set_mode_then_a_prompt_runs_with_the_new_policy(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    client, sid = conversation.client, conversation.sid
    assert await client.prompt(sid, "@@ say before") == Ended({"stopReason": "end_turn"})
    await client.request("session/set_mode", {"sessionId": sid, "modeId": "full-access"})
    assert await client.prompt(sid, "@@ say after") == Ended({"stopReason": "end_turn"})
    answer = await client.request(
        "session/set_config_option",
        {"sessionId": sid, "configId": "mode", "value": "read-only"},
    )
    assert _option(answer["configOptions"], "mode")["currentValue"] == "read-only"
    assert await client.prompt(sid, "@@ say last") == Ended({"stopReason": "end_turn"})
    modes = [turn_metadata(b, h)["sandbox_mode"] for b, h in _user_turns(scripted_model)]
    assert modes == ["workspace-write", "danger-full-access", "read-only"]
    kinds = [u["update"]["sessionUpdate"] for u in client.updates]
    assert "current_mode_update" in kinds and "config_option_update" in kinds


async def test_picking_a_model_and_an_effort_reaches_the_model_request(
    conversation: Conversation, scripted_model: ScriptedModel
) -> None:
    client, sid = conversation.client, conversation.sid
    choices = _option(conversation.opened["configOptions"], "model")["options"]
    picked = next(o["value"] for o in choices if o["value"] != "mock-model")
    answer = await client.request(
        "session/set_config_option",
        {"sessionId": sid, "configId": "model", "value": picked},
    )
    effort = _option(answer["configOptions"], "reasoning_effort")
    default = effort["currentValue"]
    other = next(o["value"] for o in effort["options"] if o["value"] != default)
    assert await client.prompt(sid, "@@ say one") == Ended({"stopReason": "end_turn"})
    await client.request(
        "session/set_config_option",
        {"sessionId": sid, "configId": "reasoning_effort", "value": other},
    )
    assert await client.prompt(sid, "@@ say two") == Ended({"stopReason": "end_turn"})
    first, second = (body for body, _ in _user_turns(scripted_model))
    assert (first["model"], first["reasoning"]["effort"]) == (picked, default)
    assert (second["model"], second["reasoning"]["effort"]) == (picked, other)


async def test_picks_are_stored_in_the_thread_and_come_back_after_a_restart(
    open_conversation: OpenConversation,
    workspace: Path,
    scripted_model: ScriptedModel,
    codex_home: Path,
) -> None:
    """Mode, model and effort picked after the last turn (Codex's experimental
    ``thread/settings/update``) are the thread's: a new bridge (and Codex) loading or
    resuming the session reports them, and its next turn runs with them; config.toml is
    never written."""
    config = (codex_home / "config.toml").read_bytes()
    cwd = str(workspace)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, sid = talk.client, talk.sid
            assert await talk.prompt("@@ say stored") == Ended({"stopReason": "end_turn"})
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
            choices = _option(talk.opened["configOptions"], "model")["options"]
            picked = next(o["value"] for o in choices if o["value"] != "mock-model")
            options = (
                await client.request(
                    "session/set_config_option",
                    {"sessionId": sid, "configId": "model", "value": picked},
                )
            )["configOptions"]
            effort = _option(options, "reasoning_effort")
            other = next(
                o["value"] for o in effort["options"] if o["value"] != effort["currentValue"]
            )
            await client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": "reasoning_effort", "value": other},
            )
        for method in ("session/load", "session/resume"):
            async with open_conversation(session=False) as reopened:
                again = reopened.client
                opened = await again.request(
                    method, {"sessionId": sid, "cwd": cwd, "mcpServers": []}
                )
                assert opened["modes"]["currentModeId"] == "read-only", method
                assert _option(opened["configOptions"], "mode")["currentValue"] == "read-only"
                model = _option(opened["configOptions"], "model")
                assert model["currentValue"] == picked, method
                # The whole catalog, in the answer itself (a fresh process, no update needed).
                assert len(model["options"]) > 1
                assert _option(opened["configOptions"], "reasoning_effort")["currentValue"] == other
                assert await again.prompt(sid, f"@@ say after {method}") == Ended(
                    {"stopReason": "end_turn"}
                )
    first, *later = _user_turns(scripted_model)
    assert (first[0]["model"], turn_metadata(*first)["sandbox_mode"]) == (
        "mock-model",
        "workspace-write",
    )
    for body, headers in later:
        assert (body["model"], body["reasoning"]["effort"]) == (picked, other)
        assert turn_metadata(body, headers)["sandbox_mode"] == "read-only"
    assert len(later) == 2
    assert (codex_home / "config.toml").read_bytes() == config, "config.toml is never written"


async def test_bad_settings_requests_are_errors_and_the_session_goes_on(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    client, sid = conversation.client, conversation.sid
    for method, params, code in [
        ("session/set_mode", {"sessionId": sid, "modeId": "yolo"}, -32602),
        ("session/set_mode", {"sessionId": "nope", "modeId": "auto"}, -32002),
        (
            "session/set_config_option",
            {"sessionId": sid, "configId": "model", "value": "no-such-model"},
            -32602,
        ),
        (
            "session/set_config_option",
            {"sessionId": sid, "configId": "temperature", "value": "hot"},
            -32602,
        ),
    ]:
        with pytest.raises(RpcError) as refused:
            await client.request(method, params)
        assert refused.value.code == code
    assert await client.prompt(sid, "@@ say still here") == Ended({"stopReason": "end_turn"})
    [(body, headers)] = _user_turns(scripted_model)
    assert turn_metadata(body, headers)["sandbox_mode"] == "workspace-write"


# -- slash commands ----------------------------------------------------------------------------------


async def test_slash_commands_are_advertised_and_run_as_turns(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    client, sid = conversation.client, conversation.sid
    announced = await client.wait_for(_is_update("available_commands_update"))
    names = [c["name"] for c in announced["params"]["update"]["availableCommands"]]
    assert {"review", "review-branch", "review-commit", "compact", "shell"} <= set(names)
    assert await client.prompt(sid, "@@ say hello") == Ended({"stopReason": "end_turn"})
    # /review runs Codex's reviewer (a sub-agent of its own) and answers with its review.
    assert await client.prompt(sid, "/review check the greeting") == Ended(
        {"stopReason": "end_turn"}
    )
    assert client.text_of(sid).endswith("Scripted reply")
    # /compact: a compaction turn; the prompt waits for it.
    assert await client.prompt(sid, "/compact") == Ended({"stopReason": "end_turn"})
    # /shell: the user's own command, in the workspace.
    assert await client.prompt(sid, "/shell echo marked > marker.txt") == Ended(
        {"stopReason": "end_turn"}
    )
    assert (workspace / "marker.txt").read_text() == "marked\n"
    # The session goes on as before.
    assert await client.prompt(sid, "@@ say after") == Ended({"stopReason": "end_turn"})
    purposes = [
        codex_internal_purpose(b, h)
        for b, h in zip(scripted_model.requests, scripted_model.request_headers, strict=True)
    ]
    assert "review" in purposes
    assert "compaction" in purposes
    reviewed = [
        b
        for b, h in zip(scripted_model.requests, scripted_model.request_headers, strict=True)
        if codex_internal_purpose(b, h) == "review"
    ]
    assert "check the greeting" in json.dumps(reviewed[0]["input"])


async def test_each_command_answered_without_a_turn_once(
    open_conversation: OpenConversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    """/status, /mcp, /skills, /goal (set, show, pause, resume, clear), /rename, /review-branch,
    /review-commit and /logout against the real Codex: each answers as agent text and
    ``end_turn`` (or, for the reviews, a review turn), and the session goes on."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        [*git, "commit", "-q", "--allow-empty", "-m", "first"],
        ["git", "checkout", "-q", "-b", "feature"],
    ):
        await trio.run_process(argv, cwd=workspace)
    (workspace / "notes.md").write_text("hello\n")
    await trio.run_process(["git", "add", "notes.md"], cwd=workspace)
    await trio.run_process([*git, "commit", "-q", "-m", "notes"], cwd=workspace)
    sha = (
        (await trio.run_process(["git", "rev-parse", "HEAD"], cwd=workspace, capture_stdout=True))
        .stdout.decode()
        .strip()
    )

    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, sid, said = talk.client, talk.sid, talk.said
            assert await client.prompt(sid, "@@ say hello") == Ended({"stopReason": "end_turn"})
            status = await said("/status")
            assert "Model: mock-model" in status and "Mode: Default" in status, status
            assert "tokens" in status  # the turn above used some context
            # No MCP server is configured here: Codex says so, through the bridge.
            assert "No MCP servers" in await said("/mcp")
            skills = await said("/skills")
            assert "**Skills**" in skills or "no skills" in skills, skills
            # The reviews come before the goal: an active goal lets Codex start a turn of its
            # own at any time, and one starting just as a review is sent races it in Codex.
            for review in ("/review-branch main", f"/review-commit {sha}"):
                assert await client.prompt(sid, review) == Ended({"stopReason": "end_turn"})
            assert "Goal set." in await said("/goal ship the notes")
            assert "(active): ship the notes" in await said("/goal")
            assert "Goal paused." in await said("/goal pause")
            assert "Goal resumed." in await said("/goal resume")
            assert "cleared" in await said("/goal clear")
            assert "has no goal" in await said("/goal")
            assert "“Notes work”" in await said("/rename Notes work")
            await client.wait_for(_is_update("session_info_update"))
            assert "Signed out" in await said("/logout")
    titles = [
        u["update"].get("title")
        for u in client.updates
        if u["update"]["sessionUpdate"] == "session_info_update"
    ]
    assert "Notes work" in titles
    reviews = [
        json.dumps(b["input"])
        for b, h in zip(scripted_model.requests, scripted_model.request_headers, strict=True)
        if codex_internal_purpose(b, h) == "review"
    ]
    assert len(reviews) == 2 and "main" in reviews[0] and sha[:7] in reviews[1]


# -- authentication -------------------------------------------------------------------------------------


async def _refuse_unauthenticated(stream: trio.SocketStream) -> None:
    """An OpenAI-like endpoint that refuses every request for lack of credentials."""
    if await request_head(stream) is not None:
        await refuse_for_lack_of_a_key(stream)


@pytest.mark.parametrize("provider", ["refuses with 401", "names an unset env_key"])
async def test_a_turn_without_credentials_fails_with_auth_required(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
    codex_home: Path,
    nursery: trio.Nursery,
    provider: str,
) -> None:
    if provider == "refuses with 401":
        port = await serve_loopback(nursery, _refuse_unauthenticated)
        extra = f'[model_providers.mock]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        extra += "requires_openai_auth = true"
    else:
        extra = '[model_providers.mock]\nenv_key = "CODEX_ACP_BRIDGE_TEST_UNSET_KEY"'
        bridge_env.pop("CODEX_ACP_BRIDGE_TEST_UNSET_KEY", None)
    write_codex_home(codex_home, scripted_model.base_url, extra_toml=extra)
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert [m["id"] for m in talk.init["authMethods"]] == ["chatgpt", "api-key"]
            for _ in range(2):  # and it stays a clear answer, never a hang
                with pytest.raises(RpcError) as refused:
                    await talk.prompt("@@ say hi")
                assert refused.value.code == -32000
                assert refused.value.message
    assert not scripted_model.requests


async def test_authenticate_hands_the_environment_api_key_to_codex(
    open_conversation: OpenConversation,
    bridge_env: dict[str, str],
    scripted_model: ScriptedModel,
    codex_home: Path,
) -> None:
    openai_key_in_the_environment(
        codex_home, scripted_model.base_url, bridge_env, "sk-bridge-test-key"
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert await talk.prompt("@@ say before") == Ended({"stopReason": "end_turn"})
            assert await talk.client.request("authenticate", {"methodId": "api-key"}) == {}
            assert await talk.prompt("@@ say after") == Ended({"stopReason": "end_turn"})
    (_, before), (_, after) = _user_turns(scripted_model)
    # Codex reads no key from its environment: only authenticate gave it one.
    assert "authorization" not in before
    assert after["authorization"] == "Bearer sk-bridge-test-key"


async def test_chatgpt_sign_in_shows_codex_sign_in_page_and_a_decline_cancels_it(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    asked: list[dict[str, Any]] = []

    async def on_request(method: str, params: Any) -> Any:
        assert method == "elicitation/create"
        asked.append(params)
        return {"action": "decline"}

    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(
            capabilities={"elicitation": {"url": {}}}, on_request=on_request, session=False
        ) as talk:
            client = talk.client
            with pytest.raises(RpcError) as refused:
                await client.request("authenticate", {"methodId": "chatgpt"})
            assert refused.value.code == -32000
            # The bridge keeps working: a session opens as before.
            await client.new_session(str(workspace))
    [elicitation] = asked
    assert elicitation["mode"] == "url"
    assert elicitation["url"].startswith("https://auth.openai.com/")
    assert elicitation["requestId"] == next(
        rid for rid, method in client.sent_requests.items() if method == "authenticate"
    )


async def test_a_configured_skill_is_offered_and_runs_as_its_own_command(
    open_conversation: OpenConversation, scripted_model: ScriptedModel, codex_home: Path
) -> None:
    """A skill in ``CODEX_HOME/skills`` is a slash command of the session: ``/greet the team``
    runs a turn whose input names the skill, and Codex hands the skill to the model. An AIR
    client is told the skill's file (Codex's path of it), and how ``/goal`` takes its text."""
    skill = codex_home / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        "---\nname: greet\ndescription: Greet people warmly\n---\n\n"
        "Greet everyone by name; the marker is purple-otter.\n"
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=declaring()) as talk:
            client = talk.client
            offered = await client.wait_for(
                lambda m: (
                    _is_update("available_commands_update")(m)
                    and any(
                        c["name"] == "greet" for c in m["params"]["update"]["availableCommands"]
                    )
                )
            )
            [greet] = [
                c for c in offered["params"]["update"]["availableCommands"] if c["name"] == "greet"
            ]
            assert "Greet people warmly" in greet["description"] and greet["input"]["hint"]
            air = greet["_meta"]["jetbrains"]["air"]
            assert Path(air["skillPath"]).resolve() == skill.resolve()
            [goal] = [
                c for c in offered["params"]["update"]["availableCommands"] if c["name"] == "goal"
            ]
            action = goal["_meta"]["jetbrains"]["air"]["commandAction"]
            assert action == {"kind": "prefixPrompt", "presentation": "state"}
            assert "Greet people warmly" in await talk.said("/skills")
            assert await talk.prompt("/greet the team") == Ended({"stopReason": "end_turn"})
    [(body, _headers)] = _user_turns(scripted_model)
    assert "purple-otter" in json.dumps(body["input"]), "the skill reached the model"
    assert "the team" in json.dumps(body["input"])


def model_request_for(scripted_model: ScriptedModel, text: str) -> str:
    """The one request of a user turn (none of Codex's own) the model was sent with ``text``
    last in its input, as JSON."""
    [body] = [
        json.dumps(b)
        for b, h in zip(scripted_model.requests, scripted_model.request_headers, strict=True)
        if codex_internal_purpose(b, h) is None and text in json.dumps(b["input"][-1])
    ]
    return body


async def test_plan_turns_codexs_plan_mode_on_and_off(
    conversation: Conversation, scripted_model: ScriptedModel
) -> None:
    """``/plan`` stores Codex's plan collaboration mode in the thread: the next turn's model
    request carries Codex's plan-mode instructions; after ``/plan off`` Codex tells the model
    it is back in the default mode."""
    talk = conversation
    assert await talk.prompt("@@ say before") == Ended({"stopReason": "end_turn"})
    assert "Plan mode on" in await talk.said("/plan")
    assert await talk.prompt("@@ say planning") == Ended({"stopReason": "end_turn"})
    assert "Plan mode off" in await talk.said("/plan off")
    assert await talk.prompt("@@ say doing") == Ended({"stopReason": "end_turn"})

    assert "# Plan Mode" not in model_request_for(scripted_model, "@@ say before")
    assert "# Plan Mode" in model_request_for(scripted_model, "@@ say planning")
    assert "Collaboration Mode: Default" in model_request_for(scripted_model, "@@ say doing")


async def test_plan_mode_is_an_option_in_step_with_plan_and_a_load_brings_it_back(
    open_conversation: OpenConversation, scripted_model: ScriptedModel, workspace: Path
) -> None:
    """The ``collaboration_mode`` option stores Codex's mode in the thread as ``/plan`` does;
    each follows the other, and a session loaded by a new bridge opens in its mode."""

    def shown(client: AcpClient, sid: str) -> str:
        updates = [
            u["update"]
            for u in client.updates
            if u["sessionId"] == sid and u["update"]["sessionUpdate"] == "config_option_update"
        ]
        return str(_option(updates[-1]["configOptions"], "collaboration_mode")["currentValue"])

    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, sid = talk.client, talk.sid
            option = _option(talk.opened["configOptions"], "collaboration_mode")
            assert option["currentValue"] == "default"
            assert [v["value"] for v in option["options"]] == ["default", "plan"]
            picked = await client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": "collaboration_mode", "value": "plan"},
            )
            assert _option(picked["configOptions"], "collaboration_mode")["currentValue"] == "plan"
            await talk.said("@@ say planning")
            assert "Plan mode off" in await talk.said("/plan off")
            assert shown(client, sid) == "default"  # /plan moved the option too
            await talk.said("@@ say doing")
            assert "Plan mode on" in await talk.said("/plan")
            assert shown(client, sid) == "plan"
        assert "# Plan Mode" in model_request_for(scripted_model, "@@ say planning")
        assert "Collaboration Mode: Default" in model_request_for(scripted_model, "@@ say doing")
        async with open_conversation(session=False) as reopened:
            opened = await reopened.client.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            assert _option(opened["configOptions"], "collaboration_mode")["currentValue"] == "plan"


async def test_codexs_automatic_reviewer_is_a_mode_and_a_thread_reviewed_so_opens_in_it(
    open_conversation: OpenConversation,
    scripted_model: ScriptedModel,
    codex_home: Path,
    workspace: Path,
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            client, sid = talk.client, talk.sid
            modes = {m["id"]: m for m in talk.opened["modes"]["availableModes"]}
            assert talk.opened["modes"]["currentModeId"] == "auto"
            assert modes["auto-review"]["name"] == "Auto-review"
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "auto-review"})
            await talk.said("@@ say reviewed")
        async with open_conversation(session=False) as reopened:
            opened = await reopened.client.request(
                "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            )
            # Codex kept the reviewer in the thread: it opens in that mode.
            assert opened["modes"]["currentModeId"] == "auto-review"
            assert _option(opened["configOptions"], "mode")["currentValue"] == "auto-review"
    # The user's own config routes approvals to the reviewer: a new session opens so.
    write_codex_home(
        codex_home, scripted_model.base_url, extra_toml='approvals_reviewer = "auto_review"'
    )
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation() as talk:
            assert talk.opened["modes"]["currentModeId"] == "auto-review"
