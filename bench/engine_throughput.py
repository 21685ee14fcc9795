"""Engine throughput: Codex ``item/agentMessage/delta`` → ACP ``agent_message_chunk``.

Each message is decoded (envelope and params), translated and encoded, all on
one core, through the same :class:`bridge.engine.Engine` the daemon runs.
Prints messages per second (best of several rounds). Target: >= 150,000/s.

    .venv/bin/python bench/engine_throughput.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time

import msgspec

from bridge.engine import Engine


def ready_engine(thread_id: str) -> Engine:
    engine = Engine()
    engine.start()
    engine.receive_codex(b'{"id":0,"result":{}}')
    engine.receive_client(
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
    )
    engine.receive_codex(msgspec.json.encode({"id": 1, "result": {"thread": {"id": thread_id}}}))
    assert thread_id in engine.threads
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
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
            }
        )
        for i in range(args.messages)
    ]
    best = 0.0
    out_bytes = 0
    for _ in range(args.rounds):
        engine = ready_engine(thread)
        receive = engine.receive_codex
        start = time.perf_counter()
        for data in messages:
            for effect in receive(data):
                out_bytes += len(effect.data)
        elapsed = time.perf_counter() - start
        best = max(best, len(messages) / elapsed)
    sample = ready_engine(thread).receive_codex(messages[0])[0].data.decode()
    print(
        f"engine: {best:,.0f} deltas/s (best of {args.rounds} rounds of {args.messages:,}; target >= 150,000/s)"
    )
    print(f"one output message: {sample}")


if __name__ == "__main__":
    main()
