"""A command's kind, one rule wherever the command is shown: its ``tool_call``,
each ``tool_call_update``, its permission request and a ``session/load``'s replay of it.

Clients auto-approve what claims to be a ``read`` or a ``search``; Codex's ``commandActions``
drop pipeline stages (``rg -l x . | xargs rm`` is a "search"). So a command is ``read`` /
``search`` only when it is one simple command that Codex parsed into reads, listings and searches
alone (:func:`bridge.engine.views.command_kind.command_kind`); a permission request is ``execute``
besides when Codex asks to run the command beyond the sandbox
(:func:`bridge.engine.features.approvals._views.permission_kind`).
"""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
import pytest

from bridge.codex.items import CommandAction
from bridge.engine.core.record_parts import Settings
from bridge.engine.features.approvals._views import escalated_command, permission_kind
from bridge.engine.views.command_kind import command_kind
from tests.support.acp_schema import ConversationValidator
from tests.support.engine_harness import Harness
from tests.test_lifecycle import Recorder, load, replayed, validate_all

READ = ["read"]
SEARCH = ["search"]
LIST = ["listFiles"]


def actions(types: list[str]) -> list[CommandAction]:
    return [CommandAction(type=t, command="x", name="x", path="x") for t in types]


# -- the classifier ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "types", "escalated", "kind"),
    [
        # The three Codex calls a read or a search: each hides a write or a deletion.
        ("rg -l hello . | xargs rm", SEARCH, False, "execute"),
        ("cat f | tee ../x", READ, False, "execute"),
        ("ls | tee ../y", LIST, False, "execute"),
        ("/bin/bash -lc 'rg -l hello . | xargs rm'", SEARCH, False, "execute"),
        ("/bin/bash -lc 'cat f | tee ../x'", READ, False, "execute"),
        # Plain reads inside the sandbox (untrusted) keep their kind; escalated, they do not.
        ("cat README.md", READ, False, "read"),
        ("cat README.md", READ, True, "execute"),
        ("rg foo", SEARCH, False, "search"),
        ("rg foo", SEARCH, True, "execute"),
        ("ls", LIST, False, "search"),
        ("ls", LIST, True, "execute"),
        ("rg foo src && ls", ["search", "listFiles"], False, "execute"),
        ("find . -name '*.py'", SEARCH, False, "search"),
        ("rg 'a|b' src", SEARCH, False, "search"),  # a quoted pipe is a pattern
        ('rg "x > y" src', SEARCH, False, "search"),
        # Codex's shell wrapper: the script is judged.
        ("/bin/bash -lc 'cat README.md'", READ, False, "read"),
        ("/bin/zsh -lc 'ls -la'", LIST, False, "search"),
        ("bash -c 'rg foo'", SEARCH, False, "search"),
        ("/bin/bash -lc 'cat README.md'", READ, True, "execute"),
        ("/bin/bash -lc 'cat a' extra", READ, False, "execute"),
        ("/bin/bash -lc \"sh -c 'cat a'\"", READ, False, "execute"),
        ("/bin/bash -lc 'cat a\nrm b'", READ, False, "execute"),
        ("pwsh -Command Get-Content a", READ, False, "execute"),
        # Redirections and here-docs.
        ("cat a > b", READ, False, "execute"),
        ("cat a >> b", READ, False, "execute"),
        ("cat < a", READ, False, "execute"),
        ("cat a 2> err", READ, False, "execute"),
        ("cat a &> out", READ, False, "execute"),
        ("cat a>b", READ, False, "execute"),
        ("cat <<EOF\nhi\nEOF", READ, False, "execute"),
        ("cat <<< hi", READ, False, "execute"),
        # Substitutions: command, backtick, process (even quoted: never looked at closer).
        ("cat $(ls)", READ, False, "execute"),
        ('cat "$(ls)"', READ, False, "execute"),
        ("cat `ls`", READ, False, "execute"),
        ("cat <(ls)", READ, False, "execute"),
        ("rg foo >(tee x)", SEARCH, False, "execute"),
        # Lists, background, subshells, groups, a newline.
        ("cat a; rm b", READ, False, "execute"),
        ("cat a;rm b", READ, False, "execute"),
        ("cat a && rm b", READ, False, "execute"),
        ("cat a || rm b", READ, False, "execute"),
        ("cat a & rm b", READ, False, "execute"),
        ("ls &", LIST, False, "execute"),
        ("(cat a)", READ, False, "execute"),
        ("{ cat a; }", READ, False, "execute"),
        ("cat a\nrm b", READ, False, "execute"),
        ("cat a#; rm b", READ, False, "execute"),  # ``#`` inside a word starts no comment
        # Programs that run others or write files, and the options that make a reader do so.
        ("xargs rm", SEARCH, False, "execute"),
        ("tee ../x", READ, False, "execute"),
        ("/usr/bin/XARGS rm", SEARCH, False, "execute"),
        ("find . -delete", LIST, False, "execute"),
        ("find . -name x -exec rm {} +", SEARCH, False, "execute"),
        ("find . -name x -execdir rm {} \\;", SEARCH, False, "execute"),
        ("find . -ok rm {} \\;", LIST, False, "execute"),
        ("find . -fprint ../out", LIST, False, "execute"),
        ("fd -x rm", LIST, False, "execute"),
        ("fd -Hx rm", LIST, False, "execute"),
        ("rg --pre=./convert foo", SEARCH, False, "execute"),
        ("git grep -O vim foo", SEARCH, False, "execute"),
        ("less '+!rm x' a", READ, False, "execute"),
        ("less -p TODO README.md", READ, False, "read"),
        ("awk '{print}' a", READ, False, "execute"),
        ("sh -c 'cat a'", READ, False, "read"),  # a wrapper Codex may write, judged as such
        ("env cat a", READ, False, "execute"),
        ("sudo cat a", READ, False, "execute"),
        ("eval cat a", READ, False, "execute"),
        ("exec cat a", READ, False, "execute"),
        ("FOO=1 cat a", READ, False, "execute"),
        ("LESSOPEN='|rm %s' less a", READ, False, "execute"),
        # What cannot be judged.
        ("cat 'unbalanced", READ, False, "execute"),
        ('/bin/bash -lc "cat a', READ, False, "execute"),
        ("cat README.md", [], False, "execute"),
        ("cat README.md", ["unknown"], False, "execute"),
        ("cat a && touch b", ["read", "unknown"], False, "execute"),
        ("", READ, False, "execute"),
        (None, READ, False, "execute"),
        # Overstated, never understated: a quoted operator alone is taken for one.
        ("rg ';' src", SEARCH, False, "execute"),
    ],
)
def test_the_kind_never_understates(
    command: str | None, types: list[str], escalated: bool, kind: str
) -> None:
    assert permission_kind(command, actions(types), escalated=escalated) == kind
    if not escalated:
        # The command's own kind, as its tool call shows it: the same rule.
        assert command_kind(command, actions(types)) == kind


@pytest.mark.parametrize(
    ("approval", "config_approval", "picked", "escalated"),
    [
        ("on-request", None, None, True),
        ("on-failure", None, None, True),
        ("never", None, None, True),
        ({"granular": {"sandbox_approval": True}}, None, None, True),
        ("untrusted", "untrusted", None, False),
        ("untrusted", "untrusted", "auto", True),  # a preset: on-request at least from now on
        ("untrusted", "untrusted", "read-only", True),
        ("untrusted", "untrusted", "config", False),  # the thread's own untrusted policy
        ("untrusted", None, "config", True),
        ("on-request", "untrusted", "config", True),  # reported otherwise: not sure
    ],
)
def test_every_command_approval_is_escalated_unless_the_policy_is_surely_untrusted(
    approval: Any, config_approval: Any, picked: str | None, escalated: bool
) -> None:
    record = Settings(approval=approval, sandbox={"type": "readOnly"}, model="m", effort=None)
    if config_approval is not None:
        record.config_policy = (config_approval, {"type": "readOnly"})
    record.picked_mode = picked
    assert escalated_command(record) is escalated


def test_unknown_settings_count_as_escalated() -> None:
    assert escalated_command(None) is True


# -- through the engine --------------------------------------------------------------------------

THREAD = "01a22ae7-543d-7570-a0b3-f5594e808861"
TURN = "01a22ae7-5452-71b0-8ca2-7d6647774c9f"
ITEM = "call_resp_3_0"
CWD = "/tmp/workspace"
PIPELINE = "rg -l hello . | xargs rm"
WRAPPED = f"/bin/bash -lc '{PIPELINE}'"
#: As Codex 0.169 parses the pipeline: one search, the ``xargs rm`` stage dropped.
PIPELINE_ACTIONS = [{"type": "search", "command": "rg -l hello .", "query": "hello", "path": "."}]


def open_session(h: Harness, approval: Any) -> None:
    """``session/new`` answered by a full 0.169 ``thread/start`` result, and a prompt."""
    rid = h.client_request("session/new", {"cwd": CWD, "mcpServers": []})
    start = h.codex_request("thread/start")
    h.codex_reply(
        start["id"],
        {
            "thread": {"id": THREAD, "cwd": CWD},
            "model": "mock-model",
            "modelProvider": "mock",
            "approvalPolicy": approval,
            "approvalsReviewer": "user",
            "sandbox": {"type": "workspaceWrite"},
            "reasoningEffort": None,
            "cwd": CWD,
        },
    )
    assert h.client_response(rid) is not None
    h.start_prompt(THREAD, turn_id=TURN)


def started(h: Harness, command: str, actions: list[dict[str, Any]], item: str = ITEM) -> None:
    """Codex's ``item/started`` for a command, as 0.169 sends it."""
    h.codex_notify(
        "item/started",
        {
            "item": {
                "type": "commandExecution",
                "id": item,
                "pluginId": None,
                "scriptPath": None,
                "command": command,
                "cwd": CWD,
                "processId": None,
                "source": "agent",
                "status": "inProgress",
                "commandActions": actions,
                "aggregatedOutput": None,
                "exitCode": None,
                "durationMs": None,
                "startedAtMs": 1796016133304,
                "completedAtMs": None,
            },
            "threadId": THREAD,
            "turnId": TURN,
            "startedAtMs": 1796016133304,
        },
    )


def asks(
    h: Harness,
    rid: int,
    command: str,
    actions: list[dict[str, Any]],
    item: str = ITEM,
    **extra: Any,
) -> dict[str, Any]:
    """Codex's ``item/commandExecution/requestApproval`` as 0.169 sends it; returns the
    ``toolCall`` of the permission request the client got."""
    params: dict[str, Any] = {
        "kind": "command",
        "threadId": THREAD,
        "turnId": TURN,
        "itemId": item,
        "startedAtMs": 1796016133304,
        "environmentId": "local",
        "reason": "test",
        "command": command,
        "cwd": CWD,
        "commandActions": actions,
        "proposedExecpolicyAmendment": ["rg", "-l", "hello", "."],
        "availableDecisions": ["accept", "cancel"],
        **extra,
    }
    message = {"id": rid, "method": "item/commandExecution/requestApproval", "params": params}
    h._collect(h.engine.receive_codex(msgspec.json.encode(message)))
    [request] = [
        m
        for m in h.to_client
        if m.get("method") == "session/request_permission"
        and m["params"]["toolCall"]["toolCallId"] == item
    ]
    tool_call: dict[str, Any] = request["params"]["toolCall"]
    return tool_call


def announced(h: Harness, item: str = ITEM) -> dict[str, Any]:
    [update] = [
        u
        for u in h.updates(THREAD)
        if u["sessionUpdate"] == "tool_call" and u["toolCallId"] == item
    ]
    return update


def test_an_escalated_pipeline_is_execute_in_its_request_and_its_tool_call() -> None:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1})
    open_session(h, "on-request")
    started(h, WRAPPED, PIPELINE_ACTIONS)
    tool_call = asks(h, 0, WRAPPED, PIPELINE_ACTIONS)
    assert tool_call["title"] == PIPELINE
    assert tool_call["kind"] == "execute"
    assert tool_call["rawInput"]["commandActions"] == PIPELINE_ACTIONS  # shown as Codex gave them
    assert announced(h)["kind"] == "execute"  # the tool call itself: the same rule


def test_under_untrusted_a_plain_read_keeps_its_kind_until_a_preset_is_picked() -> None:
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1})
    open_session(h, "untrusted")
    read = [{"type": "read", "command": "cat README.md", "name": "README.md", "path": "README.md"}]
    assert asks(h, 0, "/bin/bash -lc 'cat README.md'", read, "call_1")["kind"] == "read"
    assert asks(h, 1, WRAPPED, PIPELINE_ACTIONS, "call_2")["kind"] == "execute"
    network = {"host": "example.com", "protocol": "https"}
    asked = asks(h, 2, "cat README.md", read, "call_3", networkApprovalContext=network)
    assert asked["kind"] == "execute"
    for rid, kind in ((5, "writeStdin"), (6, "humanCommand")):  # no command of its own to judge
        assert asks(h, rid, "cat README.md", read, f"call_{kind}", kind=kind)["kind"] == "execute"

    h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "auto"})
    assert asks(h, 3, "cat README.md", read, "call_4")["kind"] == "execute"
    h.client_request("session/set_mode", {"sessionId": THREAD, "modeId": "config"})
    assert asks(h, 4, "cat README.md", read, "call_5")["kind"] == "read"


# -- one rule on every path ------------------------------------------------------------------------


def action(kind: str, command: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "command": command, **more}


def a_search(command: str, query: str, path: str | None = ".") -> dict[str, Any]:
    return action("search", command, query=query, path=path)


def a_read(command: str, name: str) -> dict[str, Any]:
    return action("read", command, name=name, path=name)


def a_listing(command: str) -> dict[str, Any]:
    return action("listFiles", command, path=None)


def an_unknown(command: str) -> dict[str, Any]:
    return action("unknown", command)


def case(name: str, command: str, kind: str, *actions: dict[str, Any]) -> Any:
    """(the command line, what Codex's parse of it gives, the kind shown everywhere)."""
    return pytest.param(command, list(actions), kind, id=name)


#: Codex's parse keeps the first stage of a pipeline and drops the rest (seen with 0.169 and
#: 0.171): what a pipeline, a redirection or a second command does is the command's kind.
COMMANDS = [
    case("xargs-rm", "rg -l hello . | xargs rm", "execute", a_search("rg -l hello .", "hello")),
    case(
        "tee-read",
        "cat hello.txt | tee ../escaped.txt",
        "execute",
        a_read("cat hello.txt", "hello.txt"),
    ),
    case("tee-listing", "ls | tee ../escaped2.txt", "execute", a_listing("ls")),
    case("redirection", "cat a.txt > ../b.txt", "execute", a_read("cat a.txt", "a.txt")),
    case(
        "find-delete",
        "find . -name '*.tmp' -delete",
        "execute",
        a_search("find . -name '*.tmp' -delete", "*.tmp"),
    ),
    case(
        "and-rm",
        "rg -l TODO . && rm notes.txt",
        "execute",
        a_search("rg -l TODO .", "TODO"),
        an_unknown("rm notes.txt"),
    ),
    case("mv", "mv a.txt b.txt", "execute", an_unknown("mv a.txt b.txt")),
    case("rg", "rg hello", "search", a_search("rg hello", "hello", None)),
    case("cat", "cat hello.txt", "read", a_read("cat hello.txt", "hello.txt")),
    case("ls", "ls -la", "search", a_listing("ls -la")),
]


def command_item(command: str, actions: list[dict[str, Any]], status: str) -> dict[str, Any]:
    """A ``commandExecution`` item as Codex sends and stores it: the line wrapped in its shell."""
    done = status != "inProgress"
    return {
        "type": "commandExecution",
        "id": ITEM,
        "command": shlex.join(["/bin/bash", "-lc", command]),
        "cwd": CWD,
        "processId": None,
        "source": "agent",
        "status": status,
        "commandActions": actions,
        "aggregatedOutput": "" if done else None,
        "exitCode": 0 if done else None,
        "durationMs": 4 if done else None,
    }


def kinds_shown(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each ``tool_call`` / ``tool_call_update`` of the command that carries a kind."""
    return [
        (u["sessionUpdate"], u["kind"])
        for u in updates
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
        and u["toolCallId"] == ITEM
        and "kind" in u
    ]


@pytest.mark.parametrize(("command", "codex_actions", "kind"), COMMANDS)
def test_a_command_has_one_kind_in_its_tool_call_updates_and_permission_request(
    command: str, codex_actions: list[dict[str, Any]], kind: str
) -> None:
    """Live, asked under ``untrusted`` (inside the sandbox: the request claims the command's
    own kind), allowed, completed."""
    h = Harness()
    h.client_request("initialize", {"protocolVersion": 1})
    open_session(h, "untrusted")
    line = command_item(command, codex_actions, "inProgress")["command"]
    started(h, line, codex_actions)
    asked = asks(h, 0, line, codex_actions)
    assert asked["kind"] == kind
    request = next(m for m in h.to_client if m.get("method") == "session/request_permission")
    answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    h.client_raw(msgspec.json.encode({"jsonrpc": "2.0", "id": request["id"], "result": answer}))
    h.codex_notify(
        "item/completed",
        {
            "item": command_item(command, codex_actions, "completed"),
            "threadId": THREAD,
            "turnId": TURN,
        },
    )
    assert kinds_shown(h.updates(THREAD)) == [("tool_call", kind), ("tool_call_update", kind)]
    validator = ConversationValidator()
    for message in h.to_client:
        if "method" in message:
            validator.agent_sent(message)


@pytest.mark.parametrize(("command", "codex_actions", "kind"), COMMANDS)
def test_a_replayed_command_has_the_kind_it_had_live(
    command: str, codex_actions: list[dict[str, Any]], kind: str
) -> None:
    h = Recorder()
    rid = load(h, [[command_item(command, codex_actions, "completed")]])
    shown = kinds_shown(replayed(h, rid))
    assert shown and {k for _, k in shown} == {kind}, shown
    validate_all(h)
