"""One bridge under concurrent load, against the real Codex: many sessions streaming at once.

Two scenarios, each run by one ``codex-acp-bridge record`` (``serve`` plus a recording of
everything its engine sees; ``serve`` itself has no recording option) over one real
``codex app-server`` and the scripted model, with a fresh ``CODEX_HOME`` and runtime directory
(so no daemon is attached to):

- **many sessions**: S sessions, each prompted at the same moment with ``@@ words N``;
- **sub-agents**: P sessions, each prompted at the same moment with a script that spawns C
  sub-agents streaming ``@@ words M`` each, waits for every one, then says ``parent K done``
  (the client declares ``clientCapabilities.subagents``, so children are sessions of their own).

After a run the bridge's output is checked; any problem fails the run (exit status 1 here,
failed assertions in ``tests/test_load.py``, ``Result.check()`` for other callers):

1. every ``session/prompt`` ended with ``stopReason: end_turn``;
2. every session's streamed text is exactly what the scripted model sent it (``words_text``),
   every child's too, each child announced on its own parent, and no message id streams on
   two sessions;
3. the RFD transcript checker (:mod:`bridge.recording.checker`) finds nothing, both over what
   the client received live and over the recording replayed through a fresh engine (which
   also proves the recording whole);
4. what the client received is what the replayed engine sent, or, when the bridge's outbox
   coalesced deltas for a client that fell behind, the same once every run of merged deltas
   is merged back (:func:`coalesced_form`): per session the same updates in the same order,
   nothing merged across a response.

Printed per scenario: wall time (prompts sent → last answer, and children idle), the
``agent_message_chunk`` deltas the client received and Codex's own ``item/agentMessage/delta``
count (they differ by what the outbox merged), deltas/s, the bridge process's CPU time
(user+sys from ``/proc/PID/stat`` over the same interval) per delta, Codex's CPU time, and
peak RSS of the bridge alone and of its whole process tree (bridge + Codex, summed ``statm``
resident sizes), sampled every 50 ms from ``/proc``. The bench process itself (the ACP client,
the scripted model, the sampler) shares the machine and is not counted.

    .venv/bin/python bench/many_sessions.py [--scenario many|subagents|both]
        [--sessions 20] [--words 5000] [--parents 8] [--children 3] [--child-words 2000]
        [--timeout 600] [--keep DIR]

``--keep DIR`` keeps each scenario's Codex home, recording (``NAME.codex.jsonl``), what the
client received (``NAME.live.acp.jsonl``) and the bridge's log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from bridge.acp_client import AcpClient, open_agent
from bridge.daemon.runtime import ENV_RUNTIME_DIR
from bridge.jsonrpc import RpcError
from bridge.recording import (
    RecordingError,
    TranscriptChecker,
    Violation,
    normalize,
    read_recording,
    replay,
)
from bridge.recording.format import MessageRecord, Recording
from bridge.scripted_model import ScriptedModel, serve_scripted_model, write_codex_home
from bridge.scripted_model.directives import words_text
from bridge.shell.codex_transport import ENV_CODEX_BIN, find_codex

__all__ = [
    "LoadFailure",
    "Progress",
    "Result",
    "main",
    "run_many_sessions",
    "run_subagents",
    "subagent_prompt",
]

#: What a plain client declares (as ``AcpClient.initialize`` does by default).
PLAIN: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
#: The same client, also showing sub-agents as sessions (the RFD's ``subagents`` capability).
SUBAGENTS: dict[str, Any] = {**PLAIN, "subagents": {}}
#: How long a parent's ``wait_agent`` may wait for one child (Codex's minimum is 10 s).
WAIT_MS = 300_000
#: How often the process tree's memory is sampled.
SAMPLE_SECONDS = 0.05
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class LoadFailure(AssertionError):
    """A run whose output was wrong: ``problems`` says every way it was."""

    def __init__(self, result: Result) -> None:
        self.result = result
        listed = "\n  ".join(result.problems)
        super().__init__(f"{result.scenario}: {len(result.problems)} problem(s):\n  {listed}")


# -- the process tree, from /proc -------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3, the state, first)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].decode().split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (0 when it is gone)."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_bytes().split()[1]) * _PAGE
    except (OSError, IndexError):
        return 0


def high_water_rss(pid: int) -> int:
    """The kernel's own peak RSS of ``pid`` (``VmHWM``), 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, ())
    return found


@dataclass
class TreeSampler:
    """Peak RSS of a process and of its tree, sampled every :data:`SAMPLE_SECONDS`."""

    pid: int
    peak_rss: int = 0
    peak_tree_rss: int = 0
    samples: int = 0

    def sample(self) -> None:
        own = rss_bytes(self.pid)
        tree = own + sum(rss_bytes(p) for p in descendants(self.pid))
        self.peak_rss = max(self.peak_rss, own)
        self.peak_tree_rss = max(self.peak_tree_rss, tree)
        self.samples += 1

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(SAMPLE_SECONDS)

    def tree_cpu(self) -> float:
        """CPU time of the processes below the bridge (Codex), so far."""
        return sum(cpu_seconds(p) for p in descendants(self.pid))


# -- what a run gives -----------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    #: The sessions the client prompted, in order.
    sessions: list[str] = field(default_factory=list)
    #: session → the stopReason its prompt ended with (or the error it got).
    stop_reasons: dict[str, str] = field(default_factory=dict)
    #: child session → its parent (the sub-agent scenario).
    children: dict[str, str] = field(default_factory=dict)
    #: session (prompted or child) → the text it was expected to stream.
    expected_text: dict[str, str] = field(default_factory=dict)
    #: sessions whose streamed text differs from the expected one → a description.
    wrong_text: dict[str, str] = field(default_factory=dict)
    #: What the transcript checker found live and in the replayed recording.
    checker_violations: list[str] = field(default_factory=list)
    #: Every way the run went wrong (the above, and more); empty for a good run.
    problems: list[str] = field(default_factory=list)
    #: Things worth knowing that are not failures.
    notes: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    #: ``agent_message_chunk`` updates the client received (runs of them may be coalesced).
    deltas: int = 0
    #: ``item/agentMessage/delta`` notifications Codex sent the bridge (from the recording).
    codex_deltas: int = 0
    #: Messages the engine sent the client (the replay), before any coalescing.
    engine_messages: int = 0
    #: Bridge process CPU (user+sys) from the prompts to the end, and of Codex below it.
    bridge_cpu_seconds: float = 0.0
    codex_cpu_seconds: float = 0.0
    peak_rss_bridge: int = 0
    peak_rss_tree: int = 0
    rss_samples: int = 0
    #: session → seconds from sending its prompt to its answer.
    prompt_seconds: dict[str, float] = field(default_factory=dict)
    messages_received: int = 0
    recording_messages: int = 0
    #: What the client received is byte for byte what the replayed engine sent...
    replay_matches_live: bool = False
    #: ... or the same once the outbox's coalesced runs of deltas are merged back.
    live_is_coalesced_replay: bool = False
    recording: Path | None = None

    @property
    def deltas_per_second(self) -> float:
        return self.deltas / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_us_per_delta(self) -> float:
        """Bridge CPU per delta delivered to the client."""
        return self.bridge_cpu_seconds / self.deltas * 1e6 if self.deltas else 0.0

    @property
    def cpu_us_per_codex_delta(self) -> float:
        """Bridge CPU per delta Codex sent (the work coming in, coalesced or not)."""
        return self.bridge_cpu_seconds / self.codex_deltas * 1e6 if self.codex_deltas else 0.0

    def check(self) -> None:
        """Raise :class:`LoadFailure` if the run had any problem."""
        if self.problems:
            raise LoadFailure(self)

    def report(self) -> str:
        mib = 1024 * 1024
        durations = sorted(self.prompt_seconds.values()) or [0.0]
        wall = self.wall_seconds or 1.0
        lines = [
            f"wall time          {self.wall_seconds:.2f} s (prompts sent -> last answer"
            + (", children idle)" if self.children else ")"),
            f"deltas delivered   {self.deltas:,} agent_message_chunk, "
            f"{self.deltas_per_second:,.0f} deltas/s",
            f"deltas from Codex  {self.codex_deltas:,} item/agentMessage/delta, "
            f"{self.codex_deltas / wall:,.0f} deltas/s"
            + (
                f" (the outbox merged them {self.codex_deltas / self.deltas:.2f} to 1)"
                if self.deltas and self.codex_deltas > self.deltas
                else ""
            ),
            f"bridge CPU         {self.bridge_cpu_seconds:.2f} s user+sys = "
            f"{self.cpu_us_per_delta:.1f} us/delta delivered, "
            f"{self.cpu_us_per_codex_delta:.1f} us/Codex delta",
            f"Codex CPU          {self.codex_cpu_seconds:.2f} s user+sys (the processes below the bridge)",
            f"peak RSS           bridge {self.peak_rss_bridge / mib:.1f} MiB, "
            f"tree {self.peak_rss_tree / mib:.1f} MiB ({self.rss_samples} samples)",
            f"prompt durations   min {durations[0]:.2f} s, median "
            f"{statistics.median(durations):.2f} s, max {durations[-1]:.2f} s",
            f"messages           {self.messages_received:,} received by the client, "
            f"{self.engine_messages:,} sent by the engine (replay), "
            f"{self.recording_messages:,} in the recording",
        ]
        ends = Counter(self.stop_reasons.values())
        lines.append(
            "checks             "
            + ", ".join(f"{n} {reason}" for reason, n in sorted(ends.items()))
            + f"; {len(self.expected_text) - len(self.wrong_text)}/{len(self.expected_text)} "
            "texts exact; checker "
            + ("clean" if not self.checker_violations else f"{len(self.checker_violations)} found")
            + (
                "; live == replay"
                if self.replay_matches_live
                else "; live == replay once coalesced runs are merged"
                if self.live_is_coalesced_replay
                else "; live is NOT the replay, coalesced or not"
            )
        )
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)


# -- driving the bridge ---------------------------------------------------------------------------


def subagent_prompt(parent: int, children: int, child_words: int) -> str:
    """The script: spawn ``children`` agents streaming ``child_words`` words each (parallel
    calls in one step), wait for each, then say ``parent {parent} done``."""

    def call(name: str, args: dict[str, Any]) -> str:
        return f"@@ call multi_agent_v1/{name} {json.dumps(args)}"

    spawns = [call("spawn_agent", {"message": f"@@ words {child_words}"})] * children
    waits = [
        call("wait_agent", {"targets": [f"{{{{agent_id#{n}}}}}"], "timeout_ms": WAIT_MS})
        for n in range(children, 0, -1)
    ]
    return "\n@@ then\n".join(["\n".join(spawns), "\n".join(waits), f"@@ say parent {parent} done"])


@dataclass
class Progress:
    """How far a run got, kept up to date as the client receives: pass one in, and after a
    ``trio.fail_after`` around the run fires, ``str(progress)`` says where it was stuck."""

    stage: str = "not started"
    prompts: int = 0
    #: session → agent_message_chunk updates received.
    chunks: Counter[str] = field(default_factory=Counter)
    #: child → parent, from each child's first ``subagent_update``.
    parents: dict[str, str] = field(default_factory=dict)
    #: child → its latest work state (``{"state": ..., "stopReason": ...}``).
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: child → when it was last reported idle; session → when its prompt was answered.
    idle_at: dict[str, float] = field(default_factory=dict)
    answered: dict[str, float] = field(default_factory=dict)
    log_path: Path | None = None
    changed: Callable[[], None] = lambda: None

    def __str__(self) -> str:
        idle = sum(1 for s in self.states.values() if s.get("state") == "idle")
        return (
            f"{self.stage}; {len(self.answered)}/{self.prompts} prompts answered, "
            f"{sum(self.chunks.values()):,} deltas received, {len(self.parents)} children "
            f"announced ({idle} idle); bridge log: {self.log_path}"
        )

    def notification(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self.chunks[params["sessionId"]] += 1
        elif kind == "subagent_update":
            child = update["sessionId"]
            self.parents.setdefault(child, params["sessionId"])
            if isinstance(update.get("state"), dict):
                self.states[child] = update["state"]
                if update["state"].get("state") == "idle":
                    self.idle_at[child] = time.perf_counter()
            self.changed()


def _note_request_positions(client: AcpClient) -> dict[Any, int]:
    """Where each client request fell among the messages received, for the live checker."""
    sent_at: dict[Any, int] = {}
    send = client.peer.request

    def request(method: str, params: Any, context: Any) -> tuple[Any, bytes]:
        rid, data = send(method, params, context)
        sent_at[rid] = len(client.received)
        return rid, data

    client.peer.request = request  # type: ignore[method-assign]
    return sent_at


def _check_live(client: AcpClient, sent_at: dict[Any, int], subagents: bool) -> list[str]:
    """The RFD checker over the conversation as the client lived it."""
    checker = TranscriptChecker(subagents=subagents)
    pending = sorted(client.sent_requests, key=lambda rid: sent_at.get(rid, 0))
    try:
        for line, message in enumerate([*client.received, None], start=1):
            while pending and sent_at.get(pending[0], 0) < line:
                rid = pending.pop(0)
                request = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": client.sent_requests[rid],
                    "params": client.sent_params[rid],
                }
                checker.client(request, line - 1)
            if message is not None:
                checker.agent(message, line)
    except Violation as exc:
        return [f"live transcript, {exc}"]
    return []


def _merge_key(message: dict[str, Any]) -> tuple[str, str, bool] | None:
    """How the outbox may merge this message into the one before it on its session:
    ``(kind, stream, appends)``, or ``None`` when it never merges (``bridge.engine.core.outbox``)."""
    update = message["params"]["update"]
    kind = update.get("sessionUpdate")
    if kind in ("agent_message_chunk", "agent_thought_chunk"):
        content = update.get("content") or {}
        if content.get("type") == "text" and "annotations" not in content:
            return kind, str(update.get("messageId") or ""), True
    elif kind == "tool_call_update":
        rest = set(update) - {"sessionUpdate", "toolCallId"}
        if rest == {"content"}:
            return "content", str(update["toolCallId"]), False
        output = (update.get("_meta") or {}).get("terminal_output")
        if rest == {"_meta"} and len(update["_meta"]) == 1 and isinstance(output, dict):
            return "terminal_output", str(update["toolCallId"]), True
    elif kind == "plan":
        return "plan", "", False
    return None


def _with_text(message: dict[str, Any], pieces: list[str]) -> dict[str, Any]:
    """``message`` (an appending delta) carrying ``pieces`` joined instead of its own text."""
    if len(pieces) == 1:
        return message
    update = dict(message["params"]["update"])
    if "content" in update:
        update["content"] = {**update["content"], "text": "".join(pieces)}
    else:
        output = {**update["_meta"]["terminal_output"], "data": "".join(pieces)}
        update["_meta"] = {"terminal_output": output}
    return {**message, "params": {**message["params"], "update": update}}


def _text_of(message: dict[str, Any]) -> str:
    update = message["params"]["update"]
    if "content" in update:
        return str(update["content"]["text"])
    return str(update["_meta"]["terminal_output"]["data"])


@dataclass
class _Merged:
    at: int
    key: tuple[str, str, bool] | None
    message: dict[str, Any]
    pieces: list[str] = field(default_factory=list)


def coalesced_form(messages: list[dict[str, Any]]) -> tuple[list[str], dict[str, list[str]]]:
    """What a stream of ACP messages says once every run of mergeable deltas is merged:
    the messages for no session (responses, requests) in order, and per session its
    updates in order, each with the number of session-less messages before it.

    Two streams with the same form differ only in how the outbox coalesced them: a client
    that is behind gets runs of consecutive deltas of one session as one message, and
    nothing else changes (no reordering within a session, nothing across a response).
    """
    barriers: list[str] = []
    runs: dict[str, list[_Merged]] = {}
    for message in messages:
        if message.get("method") != "session/update" or "id" in message:
            barriers.append(normalize(message))
            continue
        entries = runs.setdefault(message["params"]["sessionId"], [])
        key = _merge_key(message)
        last = entries[-1] if entries else None
        if key is not None and last is not None and (last.at, last.key) == (len(barriers), key):
            if key[2]:
                last.pieces.append(_text_of(message))
            else:
                last.message = message
        else:
            pieces = [_text_of(message)] if key is not None and key[2] else []
            entries.append(_Merged(len(barriers), key, message, pieces))
    return barriers, {
        session: [
            f"{e.at}:{normalize(_with_text(e.message, e.pieces) if e.pieces else e.message)}"
            for e in entries
        ]
        for session, entries in runs.items()
    }


def _check_recording(path: Path, client: AcpClient, result: Result) -> None:
    """The recording replayed through a fresh engine, with the checker; and compared with
    what the client received: the same, or the same once coalesced runs are merged."""
    try:
        recording = read_recording(path)
        transcript = replay(recording, check=True)
    except RecordingError as exc:
        result.checker_violations.append(f"recording: {exc}")
        return
    result.recording_messages = recording.end.messages
    result.codex_deltas = sum(
        1
        for entry in recording.entries
        if isinstance(entry.record, MessageRecord)
        and entry.record.dir == "from_codex"
        and b'"method":"item/agentMessage/delta"' in entry.record.data()
    )
    engine = [message for side, message in transcript.conversation if side == "agent"]
    result.engine_messages = len(engine)
    result.replay_matches_live = [normalize(m) for m in engine] == [
        normalize(m) for m in client.received
    ]
    _note_codex_order(recording, result)
    if result.replay_matches_live:
        return
    replayed_barriers, replayed = coalesced_form(engine)
    result.live_is_coalesced_replay = True
    live_barriers, lived = coalesced_form(client.received)
    if replayed_barriers != live_barriers:
        result.live_is_coalesced_replay = False
        result.problems.append(
            f"the responses and requests the client received ({len(live_barriers)}) are not "
            f"the ones the recording replays to ({len(replayed_barriers)}), in that order"
        )
    for session in sorted(set(replayed) | set(lived)):
        want, got = replayed.get(session, []), lived.get(session, [])
        if want != got:
            result.live_is_coalesced_replay = False
            at = next(
                (n for n, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                min(len(want), len(got)),
            )
            result.problems.append(
                f"session {session}: what the client received ({len(got)} updates once "
                f"merged) is not a coalescing of what the recording replays to ({len(want)}); "
                f"first difference at update {at + 1}: got "
                f"{(got[at] if at < len(got) else None)!s:.200}, replay has "
                f"{(want[at] if at < len(want) else None)!s:.200}"
            )


def _note_codex_order(recording: Recording, result: Result) -> None:
    """Say how often Codex itself ended a parent's turn before the turn of one of its
    children (the parent's ``wait_agent`` returns before Codex has sent all of the child's
    events): the client then sees the parent's answer before the child's last words."""
    if not result.children:
        return
    completed: dict[str, int] = {}
    for entry in recording.entries:
        record = entry.record
        if isinstance(record, MessageRecord) and record.dir == "from_codex":
            data = record.data()
            if b'"turn/completed"' in data:
                message = json.loads(data)
                if message.get("method") == "turn/completed":
                    completed.setdefault(message["params"]["threadId"], entry.line)
    late = [
        child
        for child, parent in result.children.items()
        if completed.get(child, 0) > completed.get(parent, 1 << 62)
    ]
    if late:
        result.notes.append(
            f"Codex sent {len(late)} of {len(result.children)} children's turn/completed after "
            "their parent's (the parent's wait_agent had returned with the child's whole message)"
        )


def _check_texts(client: AcpClient, result: Result, live: Progress) -> None:
    """Every session's text exact; every message id on one session only."""
    texts: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for params in client.updates:
        update = params["update"]
        if update["sessionUpdate"] != "agent_message_chunk":
            continue
        session = params["sessionId"]
        texts.setdefault(session, []).append(update["content"].get("text", ""))
        message_id = update.get("messageId")
        if message_id is not None and owner.setdefault(message_id, session) not in (session, ""):
            result.problems.append(
                f"message {message_id} streams on two sessions: {owner[message_id]} and {session}"
            )
            owner[message_id] = ""  # said once is enough
    for session, expected in result.expected_text.items():
        got = "".join(texts.get(session, []))
        if got != expected:
            prefix = next(
                (n for n, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                min(len(got), len(expected)),
            )
            result.wrong_text[session] = (
                f"{len(got):,} characters in {len(texts.get(session, [])):,} chunks, expected "
                f"{len(expected):,}; first difference at {prefix}: got {got[prefix : prefix + 40]!r}"
                f", expected {expected[prefix : prefix + 40]!r}"
            )
    for session, why in result.wrong_text.items():
        result.problems.append(f"text of {session}: {why}")
    strays = set(texts) - set(result.expected_text)
    if strays:
        result.problems.append(f"text streamed on unexpected sessions: {sorted(strays)}")
    result.deltas = sum(live.chunks.values())


@dataclass
class _Run:
    """One bridge's run, for the checks that follow it."""

    client: AcpClient
    sent_at: dict[Any, int]


async def _drive(
    scenario: str,
    prompts: list[str],
    *,
    capabilities: dict[str, Any],
    expected: Callable[[Result, Progress], None],
    wait_children: Callable[[Progress], bool] | None,
    workdir: Path | None,
    codex_bin: str | None,
    model: ScriptedModel | None,
    progress: Progress | None,
) -> Result:
    result = Result(scenario)
    live = Progress() if progress is None else progress
    live.prompts = len(prompts)
    with tempfile.TemporaryDirectory(prefix="bench-many-") as tmp:
        root = Path(tmp) if workdir is None else workdir
        home, workspace, runtime = root / "codex-home", root / "workspace", root / "runtime"
        for path in (home, workspace, runtime):
            path.mkdir(parents=True, exist_ok=True)
        result.recording = root / f"{scenario}.codex.jsonl"
        live.log_path = root / f"{scenario}-stderr.log"
        async with trio.open_nursery() as nursery:
            if model is None:
                model = await nursery.start(serve_scripted_model)
            assert model is not None
            write_codex_home(home, model.base_url)
            env = dict(os.environ)
            env.pop("OPENAI_API_KEY", None)
            env.pop("CODEX_API_KEY", None)
            env["CODEX_HOME"] = str(home)
            env[ENV_CODEX_BIN] = find_codex(codex_bin)
            # A runtime directory of our own: `record` attaches to a daemon if one runs there.
            env[ENV_RUNTIME_DIR] = str(runtime)
            argv = [sys.executable, "-m", "bridge", "record", "--out", str(result.recording)]
            argv += ["--log-level", "warning"]
            run = await _run_bridge(
                argv, env, prompts, str(workspace), result, live,
                capabilities=capabilities, wait_children=wait_children,
            )  # fmt: skip
            nursery.cancel_scope.cancel()
        live.stage = "checking"
        for session in result.sessions:
            reason = result.stop_reasons.get(session)
            if reason != "end_turn":
                result.problems.append(f"prompt on {session} ended with {reason!r}, not end_turn")
        expected(result, live)
        result.messages_received = len(run.client.received)
        result.checker_violations += _check_live(
            run.client, run.sent_at, subagents="subagents" in capabilities
        )
        _check_recording(result.recording, run.client, result)
        result.problems += [f"checker: {v}" for v in result.checker_violations]
        _check_texts(run.client, result, live)
        if workdir is None:
            result.recording = None
        else:
            # What the client received, to set beside `codex-acp-bridge replay RECORDING`.
            lines = "".join(normalize(m) + "\n" for m in run.client.received)
            (workdir / f"{scenario}.live.acp.jsonl").write_text(lines, encoding="utf-8")
        live.stage = "done"
    return result


async def _run_bridge(
    argv: list[str],
    env: dict[str, str],
    prompts: list[str],
    workspace: str,
    result: Result,
    live: Progress,
    *,
    capabilities: dict[str, Any],
    wait_children: Callable[[Progress], bool] | None,
) -> _Run:
    """Start the bridge, open a session per prompt, send every prompt at once, wait for
    every answer (and for the children to be idle), measuring; then close the bridge."""
    children_done = trio.Event()
    if wait_children is not None:
        live.changed = lambda: children_done.set() if wait_children(live) else None
    live.stage = "starting the bridge"
    assert live.log_path is not None
    with live.log_path.open("wb") as log:
        async with (
            open_agent(argv, env=env, stderr=log.fileno(), on_notification=live.notification) as (
                client,
                process,
            ),
            trio.open_nursery() as nursery,
        ):
            run = _Run(client, _note_request_positions(client))
            sampler = TreeSampler(process.pid)
            nursery.start_soon(sampler.run)
            live.stage = "initialize"
            await client.initialize(capabilities)
            live.stage = f"opening {len(prompts)} sessions"
            sessions: list[str] = [""] * len(prompts)

            async def open_one(n: int) -> None:
                sessions[n] = await client.new_session(workspace)

            async with trio.open_nursery() as opening:
                for n in range(len(prompts)):
                    opening.start_soon(open_one, n)
            result.sessions = sessions
            live.stage = f"{len(prompts)} prompts running"
            cpu_before, codex_before = cpu_seconds(process.pid), sampler.tree_cpu()
            start = time.perf_counter()

            async def prompt_one(session: str, text: str) -> None:
                sent = time.perf_counter()
                try:
                    answer = await client.prompt(session, text)
                except RpcError as exc:
                    result.stop_reasons[session] = f"error: {exc}"
                else:
                    result.stop_reasons[session] = str(answer.get("stopReason"))
                live.answered[session] = time.perf_counter()
                result.prompt_seconds[session] = live.answered[session] - sent

            async with trio.open_nursery() as prompting:
                for session, text in zip(sessions, prompts, strict=True):
                    prompting.start_soon(prompt_one, session, text)
            if wait_children is not None:
                live.stage = "every prompt answered, waiting for the children to be idle"
                if not wait_children(live):
                    await children_done.wait()
            result.wall_seconds = time.perf_counter() - start
            result.bridge_cpu_seconds = cpu_seconds(process.pid) - cpu_before
            result.codex_cpu_seconds = sampler.tree_cpu() - codex_before
            sampler.sample()
            result.peak_rss_bridge = max(sampler.peak_rss, high_water_rss(process.pid))
            result.peak_rss_tree = sampler.peak_tree_rss
            result.rss_samples = sampler.samples
            live.stage = "closing the bridge (it writes the end of its recording)"
            nursery.cancel_scope.cancel()
    return run


async def run_many_sessions(
    sessions: int = 20,
    words: int = 5_000,
    *,
    workdir: Path | None = None,
    codex_bin: str | None = None,
    model: ScriptedModel | None = None,
    progress: Progress | None = None,
) -> Result:
    """``sessions`` sessions in one bridge, each prompted at once with ``@@ words {words}``.

    ``workdir`` keeps the Codex home, the recording and the bridge's log (default: a temporary
    directory, removed after the checks); ``model`` is a scripted model to use (default: one of
    its own); ``progress`` is kept up to date, for a caller whose ``trio.fail_after`` fires.
    A wrong output is listed in ``Result.problems`` (``Result.check()`` raises on any).
    """

    def expected(result: Result, _live: Progress) -> None:
        result.expected_text = {s: words_text(words) for s in result.sessions}

    return await _drive(
        "many_sessions",
        [f"@@ words {words}"] * sessions,
        capabilities=PLAIN,
        expected=expected,
        wait_children=None,
        workdir=workdir,
        codex_bin=codex_bin,
        model=model,
        progress=progress,
    )


async def run_subagents(
    parents: int = 8,
    children: int = 3,
    child_words: int = 2_000,
    *,
    workdir: Path | None = None,
    codex_bin: str | None = None,
    model: ScriptedModel | None = None,
    progress: Progress | None = None,
) -> Result:
    """``parents`` sessions, each prompted at once to spawn ``children`` sub-agents streaming
    ``child_words`` words each and to wait for them (see :func:`subagent_prompt`).

    The run ends when every prompt is answered and every child announced is idle; each parent
    must have ``children`` children of its own, idle with ``end_turn``. Options as for
    :func:`run_many_sessions`.
    """

    def all_idle(live: Progress) -> bool:
        return len(live.parents) >= parents * children and all(
            live.states.get(child, {}).get("state") == "idle" for child in live.parents
        )

    def expected(result: Result, live: Progress) -> None:
        result.children = dict(live.parents)
        result.expected_text = {s: f"parent {n} done" for n, s in enumerate(result.sessions)}
        result.expected_text.update({c: words_text(child_words) for c in live.parents})
        per_parent = Counter(live.parents.values())
        for session in result.sessions:
            if per_parent[session] != children:
                result.problems.append(
                    f"{session} has {per_parent[session]} children announced, not {children}"
                )
        strangers = set(per_parent) - set(result.sessions)
        if strangers:
            result.problems.append(f"children announced on unknown parents: {sorted(strangers)}")
        late = 0
        for child, parent in live.parents.items():
            state = live.states.get(child)
            if state != {"state": "idle", "stopReason": "end_turn"}:
                result.problems.append(f"child {child} of {parent} ended {state}, not end_turn")
            elif live.idle_at.get(child, 0) > live.answered.get(parent, float("inf")):
                late += 1
        if late:
            result.notes.append(
                f"the client saw {late} of {len(live.parents)} children go idle only after "
                "their parent's prompt was answered"
            )

    return await _drive(
        "subagents",
        [subagent_prompt(n, children, child_words) for n in range(parents)],
        capabilities=SUBAGENTS,
        expected=expected,
        wait_children=all_idle,
        workdir=workdir,
        codex_bin=codex_bin,
        model=model,
        progress=progress,
    )


# -- the command line -----------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    """Run the scenarios asked for; 1 if any failed (wrong output, or out of time)."""
    runs: list[tuple[str, str, Callable[[Path | None, Progress], Awaitable[Result]]]] = []
    if args.scenario in ("many", "both"):
        title = f"(a) {args.sessions} sessions x @@ words {args.words:,}, all prompted at once"

        def many(d: Path | None, p: Progress) -> Awaitable[Result]:
            return run_many_sessions(args.sessions, args.words, workdir=d, progress=p)

        runs.append(("many_sessions", title, many))
    if args.scenario in ("subagents", "both"):
        title = (
            f"(b) {args.parents} sessions x {args.children} sub-agents x @@ words "
            f"{args.child_words:,}, all prompted at once, parents waiting"
        )

        def subagents(d: Path | None, p: Progress) -> Awaitable[Result]:
            return run_subagents(
                args.parents, args.children, args.child_words, workdir=d, progress=p
            )

        runs.append(("subagents", title, subagents))
    failed = False
    for name, title, run in runs:
        print(title, flush=True)
        workdir = None
        if args.keep:
            workdir = Path(args.keep) / name
            workdir.mkdir(parents=True, exist_ok=True)
        progress = Progress()
        try:
            with trio.fail_after(args.timeout):
                result = await run(workdir, progress)
        except trio.TooSlowError:
            print(f"  FAILED: not done within {args.timeout:.0f} s: {progress}", flush=True)
            failed = True
            continue
        print("  " + result.report().replace("\n", "\n  "), flush=True)
        if result.problems:
            print(f"  FAILED: {len(result.problems)} problem(s), listed above", flush=True)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["many", "subagents", "both"], default="both")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--words", type=int, default=5_000)
    parser.add_argument("--parents", type=int, default=8)
    parser.add_argument("--children", type=int, default=3)
    parser.add_argument("--child-words", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per scenario")
    parser.add_argument("--keep", metavar="DIR", help="keep homes, recordings and logs here")
    sys.exit(trio.run(main, parser.parse_args()))
