"""A session's other folders end to end: the real Codex, the scripted model, an ACP client
that opens a session in a workspace with a second folder (``additionalDirectories``).

A patch (``apply_patch``) into the second folder lands without asking, in a workspace-write
mode with on-request approvals, also after the mode changed and came back; one into a third
folder the session was not given still asks (and, refused, writes nothing). Codex's
workspace-write makes ``/tmp`` and ``$TMPDIR`` writable, where the test's folders are: its
configuration leaves them out, so that only the session's folders are writable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.scripted_model import ScriptedModel, write_codex_home
from tests.support.e2e import SCENARIO_SECONDS, Conversation, OpenConversation, Transport
from tests.test_e2e_daemon import status_json

pytestmark = [pytest.mark.e2e]

#: Only the session's folders writable under workspace-write (not ``/tmp``, not ``$TMPDIR``).
NO_TMP = "[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n"


def add_file(path: Path) -> str:
    """The model's turn: a patch adding ``path`` (absolute), then ``done``."""
    return (
        '@@ call exec_command {"cmd":"apply_patch <<\'EOF\'\\n*** Begin Patch\\n'
        f'*** Add File: {path}\\n+hi\\n*** End Patch\\nEOF\\n"}}\n@@ then\n@@ say done'
    )


class Refusing:
    """A client that refuses every permission asked, and keeps what was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, method: str, params: Any) -> Any:
        assert method == "session/request_permission", method
        self.asked.append(params)
        option = next(o for o in params["options"] if o["kind"] == "reject_once")
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}


@pytest.fixture
def folders(tmp_path: Path, bridge_env: dict[str, str], scripted_model: ScriptedModel) -> Path:
    """The parent of ``second`` (given to the session) and ``third`` (not given); Codex
    configured with workspace-write and on-request approvals, ``/tmp`` not writable."""
    for name in ("second", "third"):
        (tmp_path / name).mkdir()
    write_codex_home(Path(bridge_env["CODEX_HOME"]), scripted_model.base_url, extra_toml=NO_TMP)
    return tmp_path


@asynccontextmanager
async def opened_with(
    open_conversation: OpenConversation, refusing: Refusing, workspace: Path, second: Path
) -> AsyncIterator[Conversation]:
    """A conversation whose approvals ``refusing`` answers, its session opened in
    ``workspace`` with the folder ``second``."""
    async with open_conversation(on_request=refusing, session=False) as talk:
        opened = await talk.client.request(
            "session/new",
            {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": [str(second)]},
        )
        talk.sid, talk.opened = opened["sessionId"], opened
        yield talk


async def set_mode(talk: Conversation, mode: str) -> None:
    await talk.client.request(
        "session/set_config_option", {"sessionId": talk.sid, "configId": "mode", "value": mode}
    )


async def writes_and_asks(talk: Conversation, refusing: Refusing, folders: Path) -> None:
    second, third = folders / "second", folders / "third"
    await talk.said(add_file(second / "a.txt"))
    assert (second / "a.txt").read_text() == "hi\n"
    assert refusing.asked == [], "a patch in the session's second folder asked"
    await talk.said(add_file(third / "b.txt"))
    assert not (third / "b.txt").exists()
    [asked] = refusing.asked
    assert str(third / "b.txt") in str(asked)


@pytest.mark.codex_versions  # Codex 0.169 keeps a thread's roots as 0.171 does
@pytest.mark.acp_versions(1, 2)
async def test_a_patch_in_the_second_folder_lands_unasked_and_one_in_a_third_asks(
    open_conversation: OpenConversation, workspace: Path, folders: Path
) -> None:
    refusing = Refusing()
    with trio.fail_after(SCENARIO_SECONDS):
        async with opened_with(open_conversation, refusing, workspace, folders / "second") as talk:
            # The configuration's policies (workspace-write, on-request, no /tmp): no preset.
            assert talk.opened["configOptions"][0]["currentValue"] == "config"
            await writes_and_asks(talk, refusing, folders)
            # Another mode and back: the second folder is still the session's own.
            await set_mode(talk, "read-only")
            await set_mode(talk, "config")
            await talk.said(add_file(folders / "second" / "c.txt"))
            assert (folders / "second" / "c.txt").exists()
            assert len(refusing.asked) == 1


@pytest.mark.transports("daemon")
async def test_through_the_daemon_the_second_folder_is_the_sessions_and_a_load_keeps_it(
    open_conversation: OpenConversation,
    workspace: Path,
    folders: Path,
    transport: Transport,
) -> None:
    refusing = Refusing()
    second = folders / "second"
    with trio.fail_after(SCENARIO_SECONDS):
        async with opened_with(open_conversation, refusing, workspace, second) as talk:
            await writes_and_asks(talk, refusing, folders)
            sid = talk.sid
            # ``status`` shows the session's folders beside its own.
            runtime = Path(transport.env[ENV_RUNTIME_DIR])
            while True:
                shown = await status_json(transport.env, runtime)
                [line] = [t for t in shown["threads"] if t["threadId"] == sid] or [{}]
                if line.get("folders"):
                    break
                await trio.sleep(0.1)
            assert line["folders"] == [str(second)]
        # Another client of the same daemon loads the session, naming the folder again.
        async with open_conversation(on_request=refusing, session=False) as again:
            await again.client.request(
                "session/load",
                {
                    "sessionId": sid,
                    "cwd": str(workspace),
                    "mcpServers": [],
                    "additionalDirectories": [str(second)],
                },
            )
            again.sid = sid
            await again.said(add_file(second / "d.txt"))
            assert (second / "d.txt").exists()
            assert len(refusing.asked) == 1


@pytest.mark.transports("daemon")
async def test_through_the_daemon_a_window_naming_no_folder_leaves_the_others_its_own(
    open_conversation: OpenConversation, workspace: Path, folders: Path
) -> None:
    refusing = Refusing()
    second = folders / "second"
    with trio.fail_after(SCENARIO_SECONDS):
        async with opened_with(open_conversation, refusing, workspace, second) as first:
            await first.said("@@ say ready")
            # A second window loads the same session naming no folder (ACP: none), and
            # prompts: its turn has the thread's folders be its own, the cwd alone.
            async with open_conversation(on_request=refusing, session=False) as other:
                await other.client.request(
                    "session/load",
                    {"sessionId": first.sid, "cwd": str(workspace), "mcpServers": []},
                )
                other.sid = first.sid
                await other.said("@@ say mine")
            # The first window's next turn still has its second folder.
            await first.said(add_file(second / "e.txt"))
            assert (second / "e.txt").exists()
            assert refusing.asked == []
