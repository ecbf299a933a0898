"""Request logs written by a seeded generator in each public format, byte for byte as the
real files are laid out (headers, timestamp forms, line ends), so tests never need the
public data (which is never committed).

- Azure 2023: `TIMESTAMP,ContextTokens,GeneratedTokens`, CRLF on every line, no line end after
  the last row, times `YYYY-MM-DD HH:MM:SS.fffffff` (7 digits, the 7th always 0), no zone.
- Mooncake FAST'25: JSON lines `{"timestamp": ms from 0, "input_length", "output_length",
  "hash_ids"}` with Python's `", "` / `": "` separators, LF and a final line end, ceil(input /
  512) hash ids a row, one block shared by every request.
- BurstGPT: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
  (v1) or with `Session ID` and `Elapsed time` (v1.2), failures as 0 response tokens.
- infercost: `timestamp,input_tokens,output_tokens,model,session_id,prefix_hashes` or JSON
  lines of the same keys.

`python -m tests.traffic_files docs/examples/gateway-30min.csv` writes the docs' example.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

START = datetime(2026, 11, 16, 18, 15, 46, 680590)


def _times(rng: np.random.Generator, n: int, duration_s: float) -> np.ndarray:
    """n sorted arrival offsets over `duration_s`, busier in the middle (a peak)."""
    # A mixture: a flat base and a burst around two thirds of the way in.
    base = rng.uniform(0, duration_s, size=n * 3 // 4)
    burst = rng.normal(duration_s * 0.6, duration_s * 0.05, size=n - len(base))
    times = np.clip(np.concatenate([base, burst]), 0, duration_s)
    times.sort()
    return times - times[0]


def _lengths(
    rng: np.random.Generator, n: int, mean_in: float, mean_out: float
) -> tuple[np.ndarray, np.ndarray]:
    n_in = np.maximum(2, rng.lognormal(math.log(mean_in), 0.8, size=n)).astype(np.int64)
    n_out = np.maximum(1, rng.lognormal(math.log(mean_out), 0.7, size=n)).astype(np.int64)
    return n_in, np.minimum(n_out, 1000)


def azure_csv(n: int, seed: int = 0, duration_s: float = 3500.0) -> bytes:
    """An Azure-2023-style conversation trace of n requests."""
    rng = np.random.default_rng(seed)
    times = _times(rng, n, duration_s)
    # Strictly increasing, to the microsecond, as the real file is.
    micros = np.round(times * 1e6).astype(np.int64)
    micros = np.maximum.accumulate(micros + np.arange(n))
    n_in, n_out = _lengths(rng, n, 1000, 200)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for us, i, o in zip(micros.tolist(), n_in.tolist(), n_out.tolist(), strict=True):
        at = START + timedelta(microseconds=us)
        lines.append(f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond:06d}0,{i},{o}")
    return "\r\n".join(lines).encode()


def mooncake_jsonl(n: int, seed: int = 0, duration_s: float = 600.0) -> bytes:
    """A Mooncake-style trace: ms offsets on about 3 s ticks, blocks of 512 tokens, every
    request opening with block 0 and some continuing an earlier request's blocks."""
    rng = np.random.default_rng(seed)
    ticks = np.sort(rng.integers(0, int(duration_s // 3) + 1, size=n)) * 3000
    ticks -= ticks[0]
    n_in, n_out = _lengths(rng, n, 3000, 300)
    next_id = 1
    earlier: list[list[int]] = []
    out = []
    for ms, i, o in zip(ticks.tolist(), n_in.tolist(), n_out.tolist(), strict=True):
        blocks = math.ceil(i / 512)
        ids = [0]
        if earlier and rng.random() < 0.4:
            parent = earlier[int(rng.integers(0, len(earlier)))]
            ids = parent[: min(len(parent), blocks)]
        while len(ids) < blocks:
            ids.append(next_id)
            next_id += 1
        ids = ids[:blocks]
        earlier.append(ids)
        row = {"timestamp": ms, "input_length": i, "output_length": o, "hash_ids": ids}
        out.append(json.dumps(row))
    return ("\n".join(out) + "\n").encode()


def burstgpt_csv(n: int, seed: int = 0, *, layout: str = "v1", duration_s: float = 7200.0) -> bytes:
    """A BurstGPT-style log: whole seconds from the first day's midnight, ChatGPT and GPT-4,
    a few failures (0 response tokens); `layout` v1 (6 columns) or v1.2 (8, with sessions)."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.integers(3600 * 9, 3600 * 9 + int(duration_s), size=n))
    n_in, n_out = _lengths(rng, n, 600, 250)
    failed = rng.random(n) < 0.02
    n_out[failed] = 0
    models = np.where(rng.random(n) < 0.8, "ChatGPT", "GPT-4")
    if layout == "v1":
        header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
    else:
        header = (
            "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,"
            "Total tokens,Log Type"
        )
    lines = [header]
    for k in range(n):
        t, i, o, m = int(times[k]), int(n_in[k]), int(n_out[k]), str(models[k])
        kind = "Conversation log" if rng.random() < 0.7 else "API log"
        if layout == "v1":
            lines.append(f"{t},{m},{i},{o},{i + o},{kind}")
        else:
            session = int(rng.integers(1, max(2, n // 4)))
            elapsed = round(float(rng.uniform(0.5, 30.0)), 3)
            lines.append(f"{t},{session},{elapsed},{m},{i},{o},{i + o},{kind}")
    return ("\n".join(lines) + "\n").encode()


def infercost_csv(
    times_s: list[float], lengths: list[tuple[int, int]], *, start: datetime | None = None
) -> bytes:
    """The infercost CSV of requests at these offsets (RFC 3339 times from `start`)."""
    start = start or datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
    lines = ["timestamp,input_tokens,output_tokens"]
    for t, (i, o) in zip(times_s, lengths, strict=True):
        at = start + timedelta(seconds=t)
        lines.append(f"{at.isoformat().replace('+00:00', 'Z')},{i},{o}")
    return ("\n".join(lines) + "\n").encode()


def gateway_log(seed: int = 7) -> bytes:
    """The docs' example: half an hour of a chat service's gateway log in the infercost CSV
    (epoch seconds), 4 requests/s rising to a peak of about 24 around minute 19 and back,
    prompts of about 512 tokens and answers of about 64: some 16,000 requests."""
    rng = np.random.default_rng(seed)
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC).timestamp()
    times: list[float] = []
    for minute in range(30):
        rate = 4.0 + 20.0 * math.exp(-(((minute - 19) / 4.5) ** 2))
        count = int(rng.poisson(rate * 60))
        times += np.sort(rng.uniform(minute * 60, minute * 60 + 60, size=count)).tolist()
    n = len(times)
    n_in = np.clip(rng.normal(512, 40, size=n), 300, 800).astype(np.int64)
    n_out = np.clip(rng.normal(64, 8, size=n), 30, 120).astype(np.int64)
    lines = ["timestamp,input_tokens,output_tokens"]
    for k, t in enumerate(times):
        lines.append(f"{start + t:.3f},{int(n_in[k])},{int(n_out[k])}")
    return ("\n".join(lines) + "\n").encode()


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.write_bytes(gateway_log())
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
