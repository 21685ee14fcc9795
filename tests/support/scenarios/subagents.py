"""Sub-agents (Codex's ``multi_agent`` tools) as ACP subagent sessions.

The scripts here are what the scripted model plays for the parent; a spawned agent plays the
script in its spawn message. They are shared by the fixtures (``SCENARIOS``) and by the
end-to-end tests (``tests/test_e2e_subagents.py``), which drive the same conversations live.

Two things about scripts for agents:

- ``{{agent_id}}`` is filled from the newest tool result of the agent whose script holds it,
  when that agent's model answers; ``{{agent_id#N}}`` from the N-th newest (after three spawns
  in one step, ``#3`` is the first one's).
- A script inside a spawn message is part of the parent's call arguments, so the parent's model
  would fill its placeholders first. :func:`deferred` hides them from the parent: they reach the
  child intact and the child fills them with its own tool results.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from bridge.acp_client import AcpClient
from tests.support.reading import Ended

from . import Scenario, open_session
from .approvals import Answers

#: A v1 client that shows sub-agents as sessions (the RFD's ``clientCapabilities.subagents``).
SUBAGENTS: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "subagents": {},
}
#: The same client without the capability: children must stay out of sight.
NO_SUBAGENTS: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
}
#: Codex refuses a spawn by a spawned agent unless the depth limit is raised.
NESTED_TOML = "[agents]\nmax_depth = 3\n"
#: How long the client takes to answer a child's permission request, as a person would.
THINK = 0.5
#: What each of the three children says (``@@ say``): every child's transcript has its own text.
CHILD_WORDS = ("alpha", "beta", "gamma")


def mentions(message: dict[str, Any], session: str) -> bool:
    """Whether ``message`` to the client bears ``session`` in any role: the session's own,
    an update's, a sender's or a recipient's."""
    params = message.get("params") or {}
    update = params.get("update") or {}
    return session in (
        params.get("sessionId"),
        update.get("sessionId"),
        update.get("senderSessionId"),
        update.get("recipientSessionId"),
    )


def restricted_calls(cwd: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    """Client methods that would change a session (a child refuses each), with the rest of
    their params: a prompt of ``text``, a session opened in ``cwd``."""
    prompt = {"prompt": [{"type": "text", "text": text}]}
    opened = {"cwd": cwd, "mcpServers": []}
    return [
        ("session/prompt", prompt),
        ("session/set_mode", {"modeId": "read-only"}),
        ("session/set_config_option", {"configId": "mode", "value": "read-only"}),
        ("session/load", opened),
        ("session/resume", opened),
        ("session/close", {}),
        ("session/fork", opened),
    ]


def call(name: str, args: dict[str, Any]) -> str:
    return f"@@ call {name} {json.dumps(args)}"


def spawn(message: str) -> str:
    return call("multi_agent_v1/spawn_agent", {"message": message})


def wait(target: str = "{{agent_id}}", timeout_ms: int = 10_000) -> str:
    return call("multi_agent_v1/wait_agent", {"targets": [target], "timeout_ms": timeout_ms})


def send_input(message: str, target: str = "{{agent_id}}") -> str:
    return call("multi_agent_v1/send_input", {"target": target, "message": message})


def script(*steps: str) -> str:
    """Steps (each one or more directive lines) joined by ``@@ then``."""
    return "\n@@ then\n".join(steps)


def deferred(line: str) -> str:
    """``line`` with its placeholders written as JSON escapes: the parent's model passes them on
    untouched, the child that receives the script fills them."""
    return line.replace("{{", "\\u007b\\u007b").replace("}}", "\\u007d\\u007d")


#: Three children spawned by parallel calls of one step, then a wait for each.
SPAWN_THREE = script(
    "\n".join(spawn(f"@@ say {word} reporting") for word in CHILD_WORDS),
    "\n".join(wait(f"{{{{agent_id#{n}}}}}") for n in (3, 2, 1)),
    "@@ say all three reported",
)
#: One child, two assignments: spawn, wait, send_input to the same child, wait again.
SEND_TWICE = script(
    spawn("@@ say first assignment done"),
    wait(),
    send_input("@@ say second assignment done"),
    wait(),
    "@@ say parent done",
)
#: A child that spawns a grandchild and waits for it (needs :data:`NESTED_TOML`).
MIDDLE = script(spawn("@@ say grandchild here"), wait(), "@@ say middle done")
NESTED = script(deferred(spawn(MIDDLE)), wait(timeout_ms=30_000), "@@ say parent done")
#: A child running a command the sandbox refuses: Codex asks the client on the child's behalf.
ESCALATED_CHILD = script(
    call(
        "exec_command",
        {
            "cmd": "touch child-approved.txt",
            "sandbox_permissions": "require_escalated",
            "justification": "the child needs it",
        },
    ),
    "@@ say child done",
)
CHILD_APPROVAL = script(spawn(ESCALATED_CHILD), wait(), "@@ say parent done")
#: A child streaming for half a minute; the parent does not wait for it (its turn goes on).
LONG_CHILD = "@@ words 3000 delay_ms=10"
CANCEL_CHILD = script(spawn(LONG_CHILD), "@@ sleep 3000\n@@ say parent done")
#: The same child, with the parent waiting for it: cancelling the parent must reach the child.
CANCEL_PARENT = script(spawn(LONG_CHILD), wait(timeout_ms=30_000), "@@ say parent done")
#: The parent spawns a long child and ends its turn: the child streams on, in the background.
BACKGROUND_CHILD = script(spawn(LONG_CHILD), "@@ say parent done")
#: A child whose turn fails after two words; the parent goes on.
FAILING_CHILD = "@@ words 2\n@@ fail"
CHILD_FAILS = script(spawn(FAILING_CHILD), wait(), "@@ say parent carries on")


# -- reading what the client received ------------------------------------------------------------


def announcements(client: AcpClient) -> list[tuple[str, str]]:
    """(parent, child) of each first ``subagent_update`` for a child, in order."""
    seen: list[tuple[str, str]] = []
    for params in client.updates:
        update = params["update"]
        if update["sessionUpdate"] == "subagent_update":
            pair = (params["sessionId"], update["sessionId"])
            if pair[1] not in {child for _, child in seen}:
                seen.append(pair)
    return seen


def children(client: AcpClient) -> list[str]:
    return [child for _parent, child in announcements(client)]


def states(client: AcpClient, child: str) -> list[dict[str, Any]]:
    """The work-state snapshots the parent's stream carried for ``child``, in order."""
    return [
        params["update"]["state"]
        for params in client.updates
        if params["update"]["sessionUpdate"] == "subagent_update"
        and params["update"]["sessionId"] == child
        and params["update"].get("state") is not None
    ]


def has_state(client: AcpClient, child: str, state: str, stop_reason: Any = ...) -> bool:
    return any(
        s["state"] == state and (stop_reason is ... or s.get("stopReason") == stop_reason)
        for s in states(client, child)
    )


async def words_from_first_child(client: AcpClient, count: int) -> str:
    """Wait until the first child announced has streamed ``count`` words; its id."""
    await client.wait_for(
        lambda _m: (
            bool(children(client)) and len(client.text_of(children(client)[0]).split()) >= count
        )
    )
    return children(client)[0]


# -- the scenarios -------------------------------------------------------------------------------


async def spawn_and_wait(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace, SUBAGENTS)
    await client.prompt(session, SPAWN_THREE)


async def send_input_reuse(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace, SUBAGENTS)
    await client.prompt(session, SEND_TWICE)


async def nested_spawn(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace, SUBAGENTS)
    await client.prompt(session, NESTED)


async def child_approval(client: AcpClient, workspace: str) -> None:
    """The child asks; the answer waits until the parent's stream shows ``requires_action``."""
    answers = Answers(permission="allow_once", hold=True, think=THINK)
    client.on_request = answers
    session = await open_session(client, workspace, SUBAGENTS)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, CHILD_APPROVAL)
        await answers.asked.wait()
        await client.wait_for(
            lambda _m: (
                bool(children(client)) and has_state(client, children(client)[0], "requires_action")
            )
        )
        answers.release()


async def _cancel_while_a_child_streams(
    client: AcpClient, workspace: str, prompt: str, *, the_child: bool
) -> None:
    """``prompt`` spawns a child; once it has said 20 words, the child (``the_child``) or its
    parent is cancelled, and the child's work ends cancelled."""
    session = await open_session(client, workspace, SUBAGENTS)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.prompt, session, prompt)
        child = await words_from_first_child(client, 20)
        await client.notify("session/cancel", {"sessionId": child if the_child else session})
        await client.wait_for(lambda _m: has_state(client, child, "idle", "cancelled"))


async def cancel_child(client: AcpClient, workspace: str) -> None:
    await _cancel_while_a_child_streams(client, workspace, CANCEL_CHILD, the_child=True)


async def cancel_parent_cascades(client: AcpClient, workspace: str) -> None:
    await _cancel_while_a_child_streams(client, workspace, CANCEL_PARENT, the_child=False)


async def child_fails(client: AcpClient, workspace: str) -> None:
    session = await open_session(client, workspace, SUBAGENTS)
    await client.prompt(session, CHILD_FAILS)


async def subagents_without_capability(client: AcpClient, workspace: str) -> None:
    client.on_request = Answers(permission="allow_once", think=THINK)
    session = await open_session(client, workspace, NO_SUBAGENTS)
    await client.prompt(session, CHILD_APPROVAL)


async def close_root_while_child_works(client: AcpClient, workspace: str) -> None:
    """The root's turn is over, its child still streams; the client closes the root. The
    close stops the child (Codex does not cascade), and nothing about the closed root or
    its child reaches the client after the close: not the child's last words, not its
    state on the closed root's stream."""
    session = await open_session(client, workspace, SUBAGENTS)
    assert await client.prompt(session, BACKGROUND_CHILD) == Ended({"stopReason": "end_turn"})
    child = await words_from_first_child(client, 20)
    await client.request("session/close", {"sessionId": session})
    closed_at = len(client.updates)
    # Codex ends the child's turn after the close: what it sends must reach no one.
    await trio.sleep(3)
    late = [p for p in client.updates[closed_at:] if child in json.dumps(p)]
    assert not late, late


SCENARIOS = [
    Scenario(
        "spawn_and_wait",
        "three children spawned in one step, then a wait for each: announced, own transcripts",
        spawn_and_wait,
    ),
    Scenario(
        "send_input_reuse",
        "two assignments to the same child (spawn, wait, send_input, wait): one session",
        send_input_reuse,
    ),
    Scenario(
        "nested_spawn",
        "a child spawns a grandchild (max_depth 3): announced on the child's stream",
        nested_spawn,
        extra_toml=NESTED_TOML,
    ),
    Scenario(
        "child_approval",
        "a child's escalated command: the permission request is the child's, allowed once",
        child_approval,
    ),
    Scenario(
        "cancel_child",
        "session/cancel on a streaming child: it ends idle+cancelled, the parent goes on",
        cancel_child,
    ),
    Scenario(
        "cancel_parent_cascades",
        "session/cancel on the parent while its child streams: both turns are interrupted",
        cancel_parent_cascades,
    ),
    Scenario(
        "child_fails",
        "a child's turn fails: idle with the error, the parent's turn goes on",
        child_fails,
    ),
    Scenario(
        "close_root_while_child_works",
        "session/close of a root whose child streams on: the child is stopped, and nothing "
        "about either reaches the client after the close",
        close_root_while_child_works,
    ),
    Scenario(
        "subagents_without_capability",
        "a client without subagents: the spawn is a tool call, the child asks on the root",
        subagents_without_capability,
    ),
]
