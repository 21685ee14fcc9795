"""``/rewind`` end to end: a real ACP client, the bridge, the real Codex, the scripted model.

The files are read and written through Codex (``fs/*``), the history through
``thread/revert``; what Codex then holds shows in two places: the model's next request (the
prompts taken back are gone from its input) and a later ``session/load`` (its replay).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.acp_client import AcpClient
from bridge.jsonrpc import RpcError
from bridge.recording import read_recording, replay
from bridge.scripted_model import ScriptedModel
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation, record_argv
from tests.support.reading import Ended
from tests.support.scenarios.approvals import Answers
from tests.support.scenarios.subagents import SUBAGENTS, script, spawn, wait
from tests.support.scenarios.tools import BIG, PATCH_PROMPT

pytestmark = pytest.mark.e2e


def patch_prompt(patch: str, then: str = "patched") -> str:
    """A prompt whose model applies ``patch`` (``*** Begin Patch`` ... ``*** End Patch``)."""
    line = json.dumps({"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF\n"})
    return f"@@ call exec_command {line}\n@@ then\n@@ say {then}"


ADD_A = patch_prompt("*** Begin Patch\n*** Add File: a.txt\n+one\n*** End Patch", "added")
EDIT_A = patch_prompt(
    "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch", "edited"
)
COMMAND = '@@ call exec_command {"cmd": "echo x > cmd.txt"}\n@@ then\n@@ say ran'


def user_texts(model: ScriptedModel) -> list[str]:
    """The user messages of the model's latest request (Codex's own injections left out)."""
    texts = []
    for item in model.requests[-1]["input"]:
        if item.get("type") == "message" and item.get("role") == "user":
            for part in item.get("content", []):
                text = part.get("text", "")
                if text and not text.startswith("<"):
                    texts.append(text)
    return texts


async def rewound(talk: Conversation, text: str = "/rewind") -> str:
    answer = await talk.said(text)
    assert "Rewound" in answer, answer
    return answer


@pytest.mark.acp_versions(1, 2)
async def test_a_patch_taken_back_leaves_the_files_and_the_history_as_before(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    (workspace / "big.txt").write_text(BIG)
    await conversation.said("@@ say first")
    await conversation.said(PATCH_PROMPT)
    assert (workspace / "new.txt").read_text() == "hello\nworld\n"
    assert (workspace / "big.txt").read_text() != BIG

    answer = await rewound(conversation)
    assert not (workspace / "new.txt").exists()
    assert (workspace / "big.txt").read_text() == BIG
    assert "**Rewound 1 prompt.**" in answer
    assert "`new.txt`: removed (the prompt created it)" in answer
    assert "`big.txt`: its edit undone" in answer
    assert "reload the session" in answer

    # Codex's history is shorter: the model no longer sees the patch's prompt.
    await conversation.said("@@ say after")
    assert user_texts(scripted_model) == ["@@ say first", "@@ say after"]


async def test_a_file_changed_since_is_left_alone_and_reported(
    conversation: Conversation, workspace: Path
) -> None:
    (workspace / "big.txt").write_text(BIG)
    await conversation.said(PATCH_PROMPT)
    (workspace / "new.txt").write_text("hello\nworld\nmine too\n")  # the user's own edit

    answer = await rewound(conversation)
    assert (workspace / "new.txt").read_text() == "hello\nworld\nmine too\n"
    assert (workspace / "big.txt").read_text() == BIG
    assert "- `new.txt`: it changed since. The change was:" in answer
    assert "+hello\n  +world" in answer
    assert "`big.txt`: its edit undone" in answer


async def test_a_commands_effect_is_named_as_not_undone(
    conversation: Conversation, workspace: Path
) -> None:
    await conversation.said(COMMAND)
    assert (workspace / "cmd.txt").exists()

    answer = await rewound(conversation)
    assert (workspace / "cmd.txt").read_text() == "x\n"  # Codex ran it: it stays
    assert f"the command `echo x > cmd.txt`, run in `{workspace}`: its effects stay" in answer


async def test_rewind_2_takes_back_two_prompts_newest_change_first(
    conversation: Conversation, workspace: Path, scripted_model: ScriptedModel
) -> None:
    await conversation.said("@@ say kept")
    await conversation.said(ADD_A)
    await conversation.said(EDIT_A)
    assert (workspace / "a.txt").read_text() == "two\n"

    answer = await rewound(conversation, "/rewind 2")
    assert not (workspace / "a.txt").exists()
    assert "**Rewound 2 prompts.**" in answer
    # The edit undone first, giving back the text the creation made, which then goes.
    assert answer.index("its edit undone") < answer.index("removed (the prompt created it)")
    await conversation.said("@@ say next")
    assert user_texts(scripted_model) == ["@@ say kept", "@@ say next"]


async def test_a_rewind_is_refused_while_a_turn_runs(conversation: Conversation) -> None:
    client, sid = conversation.client, conversation.sid
    await conversation.said("@@ say first")
    ended: list[Any] = []

    async def slow() -> None:
        ended.append(await conversation.prompt("@@ words 40 delay_ms=100"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow)
        await client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"].get("content", {}).get("text") == "word1 "
            )
        )
        with pytest.raises(RpcError) as refused:
            await client.prompt(sid, "/rewind")
    assert refused.value.code == -32600 and "finished prompts only" in refused.value.message
    assert ended == [Ended({"stopReason": "end_turn"})]  # the turn went on
    assert "word40" in client.text_of(sid)


async def test_a_load_after_a_rewind_replays_the_shorter_conversation_without_its_subagents(
    open_conversation: OpenConversation, workspace: Path
) -> None:
    with trio.fail_after(SCENARIO_SECONDS):
        async with open_conversation(capabilities=SUBAGENTS, unstable=True) as talk:
            root = talk.sid
            await talk.said("@@ say first")
            await talk.said(script(spawn("@@ say child here"), wait(), "@@ say spawned"))
            shown = {u["update"]["sessionUpdate"] for u in talk.client.updates}
            assert "subagent_update" in shown  # the live session had its sub-agent
            answer = await rewound(talk)
        assert "the sub-agent " in answer and "no longer shows in this session's history" in answer
        async with open_conversation(session=False, capabilities=SUBAGENTS, unstable=True) as later:
            await later.client.request(
                "session/load", {"sessionId": root, "cwd": str(workspace), "mcpServers": []}
            )
    client: AcpClient = later.client
    assert client.text_of(root, "user_message_chunk") == "@@ say first"
    assert client.text_of(root) == "first"
    kinds = {u["update"]["sessionUpdate"] for u in client.updates}
    assert "subagent_update" not in kinds and "session_message" not in kinds
    assert {u["sessionId"] for u in client.updates} == {root}


async def test_a_rewind_touches_nothing_outside_the_workspace_whatever_the_history_names(
    open_conversation: OpenConversation, workspace: Path, tmp_path: Path
) -> None:
    """One patch (allowed by the client where Codex asks) writes outside the workspace three
    ways: an absolute path, a ``..`` path, and a path through a link inside that leads out;
    and one file inside. The rewind takes back the one inside only and names the others;
    its recording keeps where the link led, so that its replay does the same."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("theirs\n")
    (workspace / "link").symlink_to(outside)
    patch = (
        "*** Begin Patch\n"
        f"*** Add File: {outside}/absolute.txt\n+made\n"
        "*** Update File: ../outside/kept.txt\n@@\n-theirs\n+changed\n"
        "*** Add File: link/linked.txt\n+through the link\n"
        "*** Add File: inside.txt\n+mine\n"
        "*** End Patch"
    )
    with trio.fail_after(SCENARIO_SECONDS):
        out = tmp_path / "rewind.codex.jsonl"
        answers = Answers(permission="allow_once")
        async with open_conversation(argv=record_argv(out), on_request=answers) as talk:
            await talk.said(patch_prompt(patch))
            made = {p.name: p.read_text() for p in outside.iterdir()}
            assert made == {
                "absolute.txt": "made\n",
                "kept.txt": "changed\n",
                "linked.txt": "through the link\n",
            }
            answer = await rewound(talk)
    assert {p.name: p.read_text() for p in outside.iterdir()} == made, "nothing outside touched"
    assert not (workspace / "inside.txt").exists()
    assert "`inside.txt`: removed (the prompt created it)" in answer
    assert "Left alone (outside the session's folders, so not touched):" in answer
    for name in ("absolute.txt", "kept.txt"):
        assert f"- `{outside / name}`: outside the session's folders: left as it is." in answer
    real = (outside / "linked.txt").resolve()
    assert f"- `link/linked.txt`: outside the session's folders (it leads to {real})" in answer
    recorded = out.read_text()
    assert '"event":"real_path"' in recorded
    assert "outside the session's folders (it leads to" in replay(read_recording(str(out))).text()
