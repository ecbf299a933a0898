"""Bounds on what a client may send, shared by the API's request guard and the dataset
parser: how deeply JSON may nest, and the numeric ranges the workers can honour."""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Final

#: Arrays and objects inside one another, at most (a request body, a dataset line). Real
#: bodies nest a handful of levels; thousands exhaust the decoder's recursion.
MAX_JSON_DEPTH: Final = 32
#: The most tokens a prompt or an answer may be asked to hold (lengths, max_tokens).
MAX_TOKENS: Final = 1_000_000
#: Bounds on a rate level, requests/s: below the minimum a level's first arrival lies
#: hours away (and its schedule overflows as the rate nears zero); above the maximum no
#: single job's load generator can keep up.
MIN_RATE: Final = 0.001
MAX_RATE: Final = 100_000.0

# A JSON string, escapes included: its brackets are text, not structure.
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(c for c in range(256) if c not in b"[]{}")
# Openers to +1 and closers to -1 (as signed bytes), so the running sum is the depth.
_STEPS: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_depth(data: bytes | str) -> int:
    """How deeply arrays and objects nest in `data` (0 for a scalar), read from its brackets
    outside strings: no decoding, so any depth is measured without recursion."""
    raw = data.encode() if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= 1:
        return min(1, raw.count(b"[") + raw.count(b"{"))
    steps = array("b", _STRING.sub(b"", raw).translate(_STEPS, _NOT_BRACKETS))
    return max(0, max(accumulate(steps), default=0))


def too_deep(data: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `data` nests deeper than `limit`; cheap when it holds fewer brackets than
    that, as almost every body does."""
    raw = data.encode() if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    return json_depth(raw) > limit
