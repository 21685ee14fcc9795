"""Engine throughput: Codex ``item/agentMessage/delta`` → ACP ``agent_message_chunk``.

Each message is decoded (envelope and params), translated and encoded, all on
one core, through the same :class:`bridge.engine.Engine` the daemon runs.
Prints messages per second (best of several rounds). Target: >= 400,000/s.

Before any delta counts, the engine is brought to where a streamed answer
flows, as the daemon's would be, by answering what it actually asked:

1. :meth:`Engine.start` sends Codex ``initialize``; its answer makes the
   engine send ``initialized`` and ask for the model catalog (``model/list``).
2. ``model/list`` is answered with a one-model catalog (a last page). A
   ``session/new`` waits for the catalog, so it is sent only after this.
3. The client's ``session/new`` makes the engine send ``thread/start``; its
   answer names the thread the deltas stream on, and opens the session.

Each answer echoes the id of the request the engine sent (found by method in
the effects it returned), so the bench follows the engine if it asks more, or
in another order; a step it cannot find fails loudly, naming what was sent.

    .venv/bin/python bench/engine_throughput.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from bridge.engine import Effect, Engine, ToClient, ToCodex

CWD = "/w"
MODEL = "bench-model"
CATALOG = {"data": [{"id": MODEL, "model": MODEL, "displayName": "Bench", "isDefault": True}]}


def request_id(effects: Sequence[Effect], method: str) -> Any:
    """The id of the one request for ``method`` the engine sent Codex in ``effects``."""
    sent = [msgspec.json.decode(e.data) for e in effects if isinstance(e, ToCodex)]
    ids = [m["id"] for m in sent if m.get("method") == method and "id" in m]
    assert len(ids) == 1, f"expected one {method} request, engine sent Codex {sent}"
    return ids[0]


def answer(engine: Engine, effects: Sequence[Effect], method: str, result: Any) -> list[Effect]:
    """Answer, as Codex, the ``method`` request found in ``effects``."""
    rid = request_id(effects, method)
    return engine.receive_codex(msgspec.json.encode({"id": rid, "result": result}))


def ready_engine(thread_id: str, acp: int = 1) -> Engine:
    """An engine with Codex's handshake done, the catalog in, and a session open on
    ``thread_id`` (see the module docstring for the steps), for a client of ACP ``acp``."""
    engine = Engine()
    effects = engine.start()
    effects = answer(engine, effects, "initialize", {"userAgent": "bench/0"})
    effects = answer(engine, effects, "model/list", CATALOG)
    if acp == 2:
        init = {"protocolVersion": 2, "info": {"name": "bench", "version": "0"}}
        engine.receive_client(
            msgspec.json.encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        )
    session_new = {"cwd": CWD, "mcpServers": []}
    effects = engine.receive_client(
        msgspec.json.encode(
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": session_new}
        )
    )
    opened = {"thread": {"id": thread_id, "cwd": CWD}, "model": MODEL}
    effects = answer(engine, effects, "thread/start", opened)
    to_client = [msgspec.json.decode(e.data) for e in effects if isinstance(e, ToClient)]
    answers = [m for m in to_client if m.get("id") == 1 and "method" not in m]
    assert answers and answers[0].get("result", {}).get("sessionId") == thread_id, to_client
    assert thread_id in engine.threads.shown_ids
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--acp", type=int, choices=(1, 2), default=1, help="the client's ACP version (2: v2 face)"
    )
    args = parser.parse_args()

    thread = "019a22ac-5a31-7381-9962-40c0acf3de69"
    messages = [
        msgspec.json.encode(
            {
                "method": "item/agentMessage/delta",
                "params": {
                    "threadId": thread,
                    "turnId": "019a22ac-turn",
                    "itemId": "msg_0001",
                    "delta": f"word{i} ",
                },
                # As Codex (0.169, 0.171) stamps every notification it writes.
                "emittedAtMs": 1796143727379 + i // 1000,
            }
        )
        for i in range(args.messages)
    ]
    # Every delta must come out as exactly one update, or the rate measures nothing.
    sample_effects = ready_engine(thread, args.acp).receive_codex(messages[0])
    assert len(sample_effects) == 1 and isinstance(sample_effects[0], ToClient), sample_effects
    sample = sample_effects[0].data.decode()
    assert '"agent_message_chunk"' in sample, sample

    rates: list[float] = []
    out_bytes = 0
    for _ in range(args.rounds):
        engine = ready_engine(thread, args.acp)
        receive = engine.receive_codex
        start = time.perf_counter()
        for data in messages:
            for effect in receive(data):
                out_bytes += len(effect.data)
        elapsed = time.perf_counter() - start
        rates.append(len(messages) / elapsed)
    best = max(rates)
    print(
        f"engine (ACP v{args.acp}): {best:,.0f} deltas/s (best of {args.rounds} rounds of {args.messages:,}; "
        f"rounds {min(rates):,.0f}..{best:,.0f}; {1e6 / best:.2f} µs/delta; "
        f"target >= 400,000/s)"
    )
    print(f"output: {out_bytes / args.rounds / args.messages:.0f} bytes/delta")
    print(f"one output message: {sample}")


if __name__ == "__main__":
    main()
