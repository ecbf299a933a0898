"""CPU cost per event of the stream reader for the kinds of event request features bring:
answer content (the fast path every plain job takes), reasoning text, tool-call deltas, and
content read with its parts kept for judging (tools, structured). Prints microseconds per
event for reads of 1 and of 16 events; run it on two checkouts to compare.

    .venv/bin/python bench/features.py
"""

from __future__ import annotations

import time

from infercost.engines.reader import RawRequest, StreamReader
from sim import wire

PREFIX = wire.event_prefix("chat.completion.chunk", "chatcmpl-" + "0" * 32, 0, b'"sim-model"')
EVENTS = 40_000


def _choice(delta: bytes) -> bytes:
    return b'{"index":0,"delta":' + delta + b',"logprobs":null,"finish_reason":null}'


KINDS = {
    "content": [_choice(b'{"content":" the"}')],
    "reasoning": [_choice(b'{"reasoning_content":" the"}')],
    "tool call": [_choice(b'{"tool_calls":[{"index":0,"function":{"arguments":"\\"a"}}]}')],
}


def cost(choices: list[bytes], per_read: int, **keep: bool) -> float:
    """CPU microseconds per event."""
    chunk = b"".join(
        PREFIX + choices[k % len(choices)] + wire.EVENT_SUFFIX for k in range(per_read)
    )
    reads = EVENTS // per_read
    best = float("inf")
    for _ in range(3):
        rec = RawRequest(0, False, 0, 0, **keep)
        reader = StreamReader(rec)
        t0 = time.process_time()
        for _ in range(reads):
            reader.feed(chunk, 0)
        best = min(best, (time.process_time() - t0) / (reads * per_read) * 1e6)
    return best


def main() -> None:
    print(f"{'event':<28}{'1 a read':>10}{'16 a read':>11}  (us of CPU per event)")
    rows = [(name, choices, {}) for name, choices in KINDS.items()]
    try:
        rows.append(("content, parts kept", KINDS["content"], {"keep_parts": True}))
        RawRequest(0, False, 0, 0, keep_parts=True)
    except TypeError:
        rows.pop()  # a checkout before request features
    for name, choices, keep in rows:
        print(f"{name:<28}{cost(choices, 1, **keep):>10.2f}{cost(choices, 16, **keep):>11.2f}")


if __name__ == "__main__":
    main()
