"""How long does importing a request log take, and does its read agree with pandas? Prints
figures; asserts nothing.

`.venv/bin/python bench/traffic_import.py FILE [--format azure|mooncake|burstgpt|infercost]
[--repeat 3] [--gzip]`

FILE is a log you have (the public traces are not in the repository: docs/traffic.md says
where to download them and under which licence). The script creates a scratch database on
the Postgres named by --pg (default INFERCOST_TEST_PG, else postgresql://postgres@127.0.0.1:5432/
postgres) by running the migrations, starts `infercost api` against it, creates a team, and
POSTs the file to /v1/traffic --repeat times (each under its own name), timing each import
from the first byte sent to the answer. Then it reads the log back and sets its figures
beside the same figures computed here with pandas and numpy from the file itself: count,
duration, mean rate, the busiest minute (minutes from the first request), input and output
length percentiles, and for Mooncake files the share of prompt tokens in blocks an earlier
line had. The database is dropped unless --keep.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
from queries import Api
from scratch import add_database_options, scratch_database

FORMAT_BY_SUFFIX = {".csv": "azure", ".jsonl": "mooncake"}


def reference(data: bytes, fmt: str) -> dict[str, Any]:
    """The figures of the log, computed with pandas and numpy from the file alone."""
    if fmt == "mooncake":
        frame = pd.read_json(io.BytesIO(data), lines=True)
        offsets = (frame["timestamp"] - frame["timestamp"].min()) / 1000.0
        n_in, n_out = frame["input_length"], frame["output_length"]
    elif fmt == "azure":
        frame = pd.read_csv(io.BytesIO(data))
        at = pd.to_datetime(frame["TIMESTAMP"], format="%Y-%m-%d %H:%M:%S.%f")
        offsets = (at - at.min()).dt.total_seconds()
        n_in, n_out = frame["ContextTokens"], frame["GeneratedTokens"]
    elif fmt == "burstgpt":
        frame = pd.read_csv(io.BytesIO(data))
        offsets = frame["Timestamp"] - frame["Timestamp"].min()
        n_in, n_out = frame["Request tokens"], frame["Response tokens"]
    else:
        raise SystemExit(f"no pandas reference for format {fmt}")
    duration = float(offsets.max())
    figures: dict[str, Any] = {
        "requests": len(frame),
        "duration_s": duration,
        "mean_requests_per_s": len(frame) / duration,
        "peak_1m_requests_per_s": int((offsets // 60).value_counts().max()) / 60,
        "peak_5m_requests_per_s": int((offsets // 300).value_counts().max()) / 300,
    }
    for name, values in (("input_tokens", n_in), ("output_tokens", n_out)):
        figures[f"{name}.mean"] = float(values.mean())
        for q in (50, 90, 99):
            figures[f"{name}.p{q}"] = float(np.percentile(values.to_numpy(), q))
    if fmt == "mooncake":
        seen: set[int] = set()
        hit = 0
        for hashes, length in zip(frame["hash_ids"], n_in, strict=True):
            for k, h in enumerate(hashes):
                if h in seen:
                    hit += min(512, int(length) - 512 * k)
            seen.update(hashes)
        figures["prefix_reuse_share"] = hit / float(n_in.sum())
    return figures


def ours(read: dict[str, Any]) -> dict[str, Any]:
    """The same figures from the API's read."""
    figures = {k: read[k] for k in ("requests", "duration_s", "mean_requests_per_s",
                                    "peak_1m_requests_per_s", "peak_5m_requests_per_s")}  # fmt: skip
    for name in ("input_tokens", "output_tokens"):
        for key in ("mean", "p50", "p90", "p99"):
            figures[f"{name}.{key}"] = read[name][key]
    if read.get("prefix_reuse_share") is not None:
        figures["prefix_reuse_share"] = read["prefix_reuse_share"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--format", dest="fmt", help="default: azure for .csv, mooncake for .jsonl")
    parser.add_argument("--repeat", type=int, default=3, help="imports to time")
    parser.add_argument("--gzip", action="store_true", help="also time the file gzipped")
    add_database_options(parser)
    args = parser.parse_args()
    fmt = args.fmt or FORMAT_BY_SUFFIX.get(args.file.suffix)
    if fmt is None:
        raise SystemExit("give --format")
    data = args.file.read_bytes()
    print(f"# {args.file} ({len(data):,} bytes, format {fmt})")
    with scratch_database(args.pg, keep=args.keep) as scratch:
        api = Api(scratch.url)
        try:
            run(api, data, fmt, args)
        finally:
            api.stop()


def run(api: Api, data: bytes, fmt: str, args: argparse.Namespace) -> None:
    admin = {"Authorization": f"Bearer {api.admin}"}
    with httpx.Client(base_url=api.url, timeout=600) as http:
        team = http.post("/v1/teams", json={"name": "bench"}, headers=admin).json()
        key = http.post(f"/v1/teams/{team['id']}/keys", json={"name": "b"}, headers=admin).json()
        http.headers["Authorization"] = f"Bearer {key['key']}"
        bodies = [("plain", data)]
        if args.gzip:
            bodies.append(("gzip", gzip.compress(data)))
        read: dict[str, Any] = {}
        for label, body in bodies:
            seconds = []
            for k in range(args.repeat):
                started = time.perf_counter()
                response = http.post(
                    "/v1/traffic", params={"format": fmt, "name": f"{label}-{k}"}, content=body
                )
                seconds.append(time.perf_counter() - started)
                if response.status_code != 201:
                    raise SystemExit(f"import failed: {response.status_code} {response.text}")
                read = response.json()
            print(
                f"import ({label}, {len(body):,} bytes, {read['requests']:,} requests): "
                f"median {statistics.median(seconds):.2f} s, each "
                + ", ".join(f"{s:.2f}" for s in seconds)
                + f" s; {read['requests'] / statistics.median(seconds):,.0f} requests/s"
            )
        started = time.perf_counter()
        full = http.get(f"/v1/traffic/{read['id']}", params={"interval": 60}).json()
        print(f"read with a per-minute series: {time.perf_counter() - started:.3f} s")
    expected = reference(data, fmt)
    got = ours(full)
    print(f"{'figure':<26} {'infercost':>16} {'pandas/numpy':>16} {'rel. diff':>10}")
    worst = 0.0
    for name, value in expected.items():
        mine = got.get(name)
        diff = abs(mine - value) / abs(value) if mine is not None and value else 0.0
        worst = max(worst, diff)
        print(f"{name:<26} {mine:>16,.6f} {value:>16,.6f} {diff:>10.2e}")
    print(f"largest relative difference: {worst:.2e}")
    json.dump({"import_s": seconds}, sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
