"""Replay speed: reading and replaying a large recording, with and without the RFD checker.

Synthesizes (in memory) a recording of about 100,000 ``item/agentMessage/delta``
notifications across 5 sessions, built from the real
``fixtures/streamed_answer.codex.jsonl``: its start-up (``initialize``), then
each session's ``session/new`` → ``thread/start`` exchange and ``session/prompt``
→ ``turn/start`` turn with thread and turn ids of its own; the sessions' deltas
are interleaved round-robin, as concurrent sessions stream, and the template's
closing event ends it. What the bridge sends Codex is taken from a fresh engine
run over these inputs, and Codex's answers are renumbered to the request ids
it allocated, so the replay's engine meets exactly the traffic it expects. The
header says ``synthetic: true`` and why. Then times, best of several rounds:
``parse_recording`` (bytes → records), ``replay`` with ``check=False``,
``replay`` with the checker, and the two together, printing messages (the
recording's message records) per second. The machine's other load shows in
these numbers: compare runs made back to back.

    .venv/bin/python bench/replay_speed.py [--deltas N] [--sessions S] [--rounds R] [--write PATH]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from bridge.engine import Engine, ToCodex
from bridge.recording import Recording, parse_recording, read_recording, replay
from bridge.recording.format import EndRecord, EventRecord, MessageRecord, encode_record
from bridge.recording.redact import Redactor

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "fixtures" / "streamed_answer.codex.jsonl"


def _message(record: MessageRecord) -> dict[str, Any]:
    return msgspec.json.decode(record.data())  # type: ignore[no-any-return]


def synthesize(deltas: int, sessions: int) -> tuple[bytes, int]:
    """The recording's bytes, and how many message records it holds."""
    template = read_recording(TEMPLATE)
    records = [e.record for e in template.entries if isinstance(e.record, MessageRecord)]
    # Events (the client leaving at the end) close the synthetic recording too.
    events = [e.record for e in template.entries if isinstance(e.record, EventRecord)]
    messages = [_message(r) for r in records]

    def index(direction: str, test: Callable[[dict[str, Any]], bool]) -> int:
        return next(
            i
            for i, (r, m) in enumerate(zip(records, messages, strict=True))
            if r.dir == direction and test(m)
        )

    new_at = index("from_client", lambda m: m.get("method") == "session/new")
    prompt_at = index("from_client", lambda m: m.get("method") == "session/prompt")
    first_delta = index("from_codex", lambda m: m.get("method") == "item/agentMessage/delta")
    after_deltas = (
        max(i for i, m in enumerate(messages) if m.get("method") == "item/agentMessage/delta") + 1
    )

    def params_of(method: str) -> dict[str, Any]:
        return next(m["params"] for m in messages if m.get("method") == method)  # type: ignore[no-any-return]

    thread = params_of("thread/started")["thread"]["id"]
    turn = params_of("turn/started")["turn"]["id"]
    item = messages[first_delta]["params"]["itemId"]

    def rename(message: dict[str, Any], k: int) -> dict[str, Any]:
        """A copy of ``message`` with session ``k``'s own thread and turn ids."""
        data = msgspec.json.encode(message)
        data = data.replace(thread.encode(), f"{thread[:-12]}{k:012x}".encode())
        data = data.replace(turn.encode(), f"{turn[:-12]}{k:012x}".encode())
        return msgspec.json.decode(data)  # type: ignore[no-any-return]

    per_session = deltas // sessions
    texts = ["".join(f"s{k}w{i} " for i in range(per_session)) for k in range(sessions)]
    # (direction, message, session): session -1 is the connection's start-up.
    out: list[tuple[str, dict[str, Any], int]] = []
    out += [(records[i].dir, dict(messages[i]), -1) for i in range(new_at)]
    # Sessions open one after the other: session/new, thread/start, its answer, thread/started...
    for k in range(sessions):
        for i in range(new_at, prompt_at):
            out.append((records[i].dir, rename(messages[i], k), k))
    # Each session's prompt, up to its answer's first delta.
    for k in range(sessions):
        for i in range(prompt_at, first_delta):
            out.append((records[i].dir, rename(messages[i], k), k))
    # The deltas, interleaved round-robin across the sessions.
    delta = messages[first_delta]
    for i in range(per_session):
        for k in range(sessions):
            params = {
                "threadId": f"{thread[:-12]}{k:012x}",
                "turnId": f"{turn[:-12]}{k:012x}",
                "itemId": item,
                "delta": f"s{k}w{i} ",
            }
            out.append(("from_codex", {**delta, "params": params}, k))
    # Each turn's end: item/completed (with the whole text), usage, status, turn/completed.
    for k in range(sessions):
        for i in range(after_deltas, len(records)):
            message = rename(messages[i], k)
            params = message.get("params") or {}
            items = [params.get("item"), *((params.get("turn") or {}).get("items") or [])]
            for it in items:
                if isinstance(it, dict) and it.get("type") == "agentMessage":
                    it["text"] = texts[k]
            out.append((records[i].dir, message, k))

    # What the bridge sends Codex is whatever a fresh engine sends for these inputs
    # (it may, for instance, ask for the model list only once): run one, record its
    # requests where it makes them, and give Codex's answers the ids it allocated.
    # Answers to requests it no longer makes are left out; the client's requests
    # get fresh ids of their own.
    thread_config = template.header.engine.get("threadConfig") if template.header.engine else None
    engine = Engine(thread_config=thread_config)
    redactor = Redactor()
    final: list[tuple[str, Any]] = []  # (direction, message) or ("event", EventRecord)
    unmatched: list[dict[str, Any]] = []  # requests the engine sent, not yet paired
    codex_ids: dict[tuple[int, Any], Any] = {}  # (session, template id) → engine id

    def sent(effects: list[Any]) -> None:
        for effect in effects:
            if isinstance(effect, ToCodex):
                message = msgspec.json.decode(effect.data)
                final.append(("to_codex", redactor.value(message)))
                if "method" in message and "id" in message:
                    unmatched.append(message)

    sent(engine.start())
    client_ids = 0
    for direction, message, k in out:
        if direction == "to_codex":
            if "method" in message and "id" in message:
                mine = next((m for m in unmatched if m["method"] == message["method"]), None)
                if mine is not None:
                    unmatched.remove(mine)
                    codex_ids[(k, message["id"])] = mine["id"]
            continue
        if direction == "from_client":
            if "method" in message and "id" in message:
                message["id"], client_ids = client_ids, client_ids + 1
            final.append((direction, message))
            sent(engine.receive_client(msgspec.json.encode(message)))
            continue
        if "method" not in message:  # Codex's answer to one of the bridge's requests
            if (k, message["id"]) not in codex_ids:
                continue
            message["id"] = codex_ids[(k, message["id"])]
        final.append((direction, message))
        sent(engine.receive_codex(msgspec.json.encode(message)))
    for event in events:  # the template's events close it (the client leaving)
        final.append(("event", event))
        if event.event == "client_lost":
            sent(engine.client_lost())
        elif event.event == "codex_lost":
            sent(engine.codex_lost(event.reason))

    header = msgspec.structs.replace(
        template.header,
        synthetic=True,
        note=(
            f"bench/replay_speed.py: {per_session * sessions} agent message deltas across "
            f"{sessions} sessions, built from {TEMPLATE.name} with renumbered thread, turn "
            "and request ids; not a recording of a real run"
        ),
    )
    lines = [encode_record(header)]
    for n, (direction, message) in enumerate(final):
        if isinstance(message, EventRecord):
            lines.append(encode_record(msgspec.structs.replace(message, t=n * 1e-5)))
            continue
        raw = msgspec.Raw(msgspec.json.encode(message))
        lines.append(encode_record(MessageRecord(t=n * 1e-5, dir=direction, message=raw)))
    count = sum(1 for _, message in final if not isinstance(message, EventRecord))
    lines.append(encode_record(EndRecord(t=len(final) * 1e-5, messages=count)))
    return b"".join(lines), count


def best_of(rounds: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", type=Path, help="also write the synthetic recording here")
    args = parser.parse_args()

    data, messages = synthesize(args.deltas, args.sessions)
    if args.write:
        args.write.write_bytes(data)
    recording: Recording = parse_recording(data, "synthetic.codex.jsonl")

    # What the replay produced, to be sure the numbers time a replay that worked.
    transcript = replay(recording)
    chunks = sum(1 for line in transcript.lines if '"agent_message_chunk"' in line)
    ends = sum(1 for line in transcript.lines if '"stopReason":"end_turn"' in line)
    if (chunks, ends) != (args.deltas // args.sessions * args.sessions, args.sessions):
        raise SystemExit(f"the replay went wrong: {chunks} chunks, {ends} prompts ended")

    parse = best_of(args.rounds, lambda: parse_recording(data, "synthetic.codex.jsonl"))
    unchecked = best_of(args.rounds, lambda: replay(recording, check=False))
    checked = best_of(args.rounds, lambda: replay(recording, check=True))
    both = best_of(
        args.rounds, lambda: replay(parse_recording(data, "synthetic.codex.jsonl"), check=True)
    )
    print(
        f"synthetic recording: {messages:,} messages ({chunks:,} deltas, {args.sessions} sessions), "
        f"{len(data) / 1e6:.1f} MB; {len(transcript.lines):,} ACP messages out; "
        f"best of {args.rounds} rounds"
    )
    for label, seconds in (
        ("parse_recording", parse),
        ("replay, checker off", unchecked),
        ("replay, checker on", checked),
        ("parse + replay, checker on", both),
    ):
        print(f"{label:28} {messages / seconds:>12,.0f} messages/s  ({seconds:.3f} s)")


if __name__ == "__main__":
    main()
