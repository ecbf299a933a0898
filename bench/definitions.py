"""How long does GET /v1/runs/{id}?definitions=... take on a big run? Prints figures.

`.venv/bin/python bench/definitions.py [--samples 100000] [--chunks 16] [--iterations 7]`

1. Creates a scratch database on the Postgres named by --pg (default INFERCOST_TEST_PG, else
   postgresql://postgres@127.0.0.1:5432/postgres) and builds it by running the migrations.
2. Writes one team, endpoint, deployment, job and finished run, and loads --samples request
   samples into the run with COPY: --chunks content events each, 8 warm-up requests, 1% of
   requests timed out (no event), continuous usage on half of them (first chunk 1 or 2
   tokens). Then VACUUM ANALYZE.
3. Times the service call the route makes, DefinitionsService.block (read the samples,
   recompute, build the block), for each tool over its own session: p50 and max of
   --iterations after one warm-up, with the read and the recomputation apart. The same for
   the previous path, never released and kept below as the baseline (`legacy_samples`
   reads a Sample object per request, `legacy_recompute` recomputes request by request;
   its block is built as the service builds one), and checks that both give the same
   figures. One difference is the point of the change and stays: the previous path reads
   every chunk time for every tool, the service only for the tools that pool chunk gaps
   (READS_CHUNK_TIMES).
4. Drops the database unless --keep.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import asyncpg
import msgspec
import numpy as np
from scratch import add_database_options, scratch_database
from sqlalchemy import LargeBinary, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from api.domain.runs.definitions import DefinitionsService
from api.domain.runs.schemas import Definitions, Distribution
from infercost.figures.metrics import STAT_KEYS, distribution
from infercost.figures.peers import (
    DIFFERENCES,
    METRIC_NAMES,
    READS_CHUNK_TIMES,
    REPORTED_STATS,
    SOURCES,
    TOOLS,
    Sample,
    Stats,
    Tool,
    ToolFigures,
    recompute,
)
from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from infercost.jobs.models import RequestSample, Run

SAMPLE_COLUMNS = (
    "run_id", "seq", "warmup", "t_sched", "t_send", "ttfb_ms", "ttft_ms", "tpot_ms", "e2e_ms",
    "n_in", "n_out", "count_source", "status", "error_class", "chunk_times_ms", "chunk_tokens",
)  # fmt: skip


# --- the previous path, for the comparison: one Sample per request ---------------------


def _legacy_figures(
    tool: Tool,
    *,
    tpot_ms: Stats,
    itl_ms: Stats,
    output_tokens_per_s: float | None,
    requests_per_s: float | None,
    duration_s: float | None,
) -> ToolFigures:
    return ToolFigures(
        tool=tool,
        tpot_ms=tpot_ms,
        itl_ms=itl_ms,
        output_tokens_per_s=output_tokens_per_s,
        requests_per_s=requests_per_s,
        duration_s=duration_s,
        metric_names=dict(METRIC_NAMES[tool]),
        reported_stats=REPORTED_STATS[tool],
        differences=DIFFERENCES[tool],
        sources=SOURCES[tool],
    )


_ELEMENT = np.dtype([("length", ">i4"), ("value", ">f8")])
_LEGACY_COLUMNS = (
    RequestSample.t_sched,
    RequestSample.t_send,
    RequestSample.e2e_ms,
    RequestSample.n_out,
    func.substring(func.array_send(RequestSample.chunk_times_ms), 21).cast(LargeBinary),
    RequestSample.chunk_tokens[1],
    RequestSample.error_class.is_(None),
    RequestSample.warmup,
)


async def legacy_samples(session: AsyncSession, run_id: uuid.UUID) -> list[Sample]:
    """Every sample of the run as a Sample object, each with all its chunk times."""
    result = await session.execute(select(*_LEGACY_COLUMNS).where(RequestSample.run_id == run_id))
    rows = result.all()
    elements = np.frombuffer(b"".join(row[4] for row in rows), dtype=_ELEMENT)
    chunks = np.split(
        elements["value"].astype(np.float64),
        np.cumsum([len(row[4]) // _ELEMENT.itemsize for row in rows])[:-1],
    )
    return [
        Sample(t_sched, t_send, e2e, n_out, times, first, ok, warmup)
        for (t_sched, t_send, e2e, n_out, _, first, ok, warmup), times in zip(
            rows, chunks, strict=True
        )
    ]


def _legacy_pooled_gaps(samples: Sequence[Sample]) -> np.ndarray:
    lengths = np.fromiter((len(s.chunk_times_ms) for s in samples), dtype=np.int64, count=-1)
    if lengths.size == 0 or int(lengths.sum()) == 0:
        return np.empty(0)
    flat = np.concatenate(
        [np.asarray(s.chunk_times_ms, dtype=np.float64) for s in samples if len(s.chunk_times_ms)]
    )
    gaps = np.diff(flat)
    starts = np.cumsum(lengths[lengths > 0])[:-1]
    keep = np.ones(gaps.size, dtype=bool)
    keep[starts - 1] = False
    return gaps[keep]


def _legacy_rate(amount: float, span: float | None) -> float | None:
    return None if span is None or span <= 0 else float(amount / span)


def _legacy_span(ends: Iterable[float], starts: Iterable[float]) -> float | None:
    end = max(ends, default=None)
    start = min(starts, default=None)
    if end is None or start is None or end <= start:
        return None
    return float(end - start)


def _legacy_t_end(s: Sample) -> float | None:
    return None if s.e2e_ms is None else s.t_send + s.e2e_ms / 1000.0


def _legacy_weighted(values: Sequence[float], weights: Sequence[float]) -> Stats:
    arr = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    count = round(float(w.sum())) if w.size else 0
    uniq, inverse = np.unique(arr, return_inverse=True)
    combined = np.zeros_like(uniq)
    np.add.at(combined, inverse, w)
    keep = combined > 0
    uniq, combined = uniq[keep], combined[keep]
    if uniq.size == 0:
        return {k: (0 if k == "count" else None) for k in STAT_KEYS}
    prob = combined / combined.sum()
    cdf = np.cumsum(prob)
    mean = float(np.sum(uniq * prob))
    out: Stats = {
        "count": count,
        "mean": mean,
        "std": math.sqrt(float(np.sum((uniq - mean) ** 2 * prob))),
        "min": float(uniq[0]),
    }
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)):
        index = min(int(np.searchsorted(cdf, q, side="left")), uniq.size - 1)
        out[key] = float(uniq[index])
    out["max"] = float(uniq[-1])
    return out


def _legacy_last_ms(s: Sample) -> float | None:
    return s.chunk_times_ms[-1] if len(s.chunk_times_ms) else s.e2e_ms


def _legacy_vllm(measured: Sequence[Sample], ok: Sequence[Sample]) -> ToolFigures:
    tpot = [
        (s.chunk_times_ms[-1] - s.chunk_times_ms[0]) / (s.n_out - 1)
        for s in ok
        if s.n_out > 1 and len(s.chunk_times_ms)
    ]
    ends = [e for s in measured if (e := _legacy_t_end(s)) is not None]
    duration = _legacy_span(ends, (s.t_sched for s in measured))
    return _legacy_figures(
        "vllm",
        tpot_ms=distribution(tpot),
        itl_ms=distribution(_legacy_pooled_gaps(ok)),
        output_tokens_per_s=_legacy_rate(sum(s.n_out for s in ok), duration),
        requests_per_s=_legacy_rate(len(ok), duration),
        duration_s=duration,
    )


def _legacy_guidellm(measured: Sequence[Sample], ok: Sequence[Sample]) -> ToolFigures:
    timed = [(s, last) for s in ok if s.n_out > 0 and (last := _legacy_last_ms(s)) is not None]
    multi = [s for s, _ in timed if s.n_out > 1]
    itl = [
        (s.chunk_times_ms[-1] - s.chunk_times_ms[0]) / (s.n_out - 1)
        if len(s.chunk_times_ms)
        else 0.0
        for s in multi
    ]
    token_span = _legacy_span(
        (s.t_send + last / 1000.0 for s, last in timed),
        (
            s.t_send + (s.chunk_times_ms[0] if len(s.chunk_times_ms) else last) / 1000.0
            for s, last in timed
        ),
    )
    ends = [e for s in measured if (e := _legacy_t_end(s)) is not None]
    window = _legacy_span(ends, (s.t_sched for s in measured))
    return _legacy_figures(
        "guidellm",
        tpot_ms=_legacy_weighted(
            [last / s.n_out for s, last in timed], [s.n_out for s, _ in timed]
        ),
        itl_ms=_legacy_weighted(itl, [s.n_out - 1 for s in multi]),
        output_tokens_per_s=_legacy_rate(sum(s.n_out for s, _ in timed), token_span),
        requests_per_s=_legacy_rate(len(ok), window),
        duration_s=window,
    )


def _legacy_decode_tokens(s: Sample) -> int:
    first = s.first_chunk_tokens
    if first is None or first <= 0 or s.n_out - first < 1:
        return s.n_out - 1
    return s.n_out - first


def _legacy_aiperf(ok: Sequence[Sample]) -> ToolFigures:
    timed = [(s, last) for s in ok if (last := _legacy_last_ms(s)) is not None]
    tpot = [
        (s.chunk_times_ms[-1] - s.chunk_times_ms[0]) / _legacy_decode_tokens(s)
        for s, _ in timed
        if s.n_out >= 2 and len(s.chunk_times_ms)
    ]
    duration = _legacy_span(
        (s.t_send + last / 1000.0 for s, last in timed), (s.t_send for s, _ in timed)
    )
    return _legacy_figures(
        "aiperf",
        tpot_ms=distribution(tpot),
        itl_ms=distribution(_legacy_pooled_gaps(ok)),
        output_tokens_per_s=_legacy_rate(sum(s.n_out for s, _ in timed), duration),
        requests_per_s=_legacy_rate(len(timed), duration),
        duration_s=duration,
    )


def legacy_recompute(tool: Tool, samples: Iterable[Sample]) -> ToolFigures:
    """The figures of `tool` from one Sample per request, computed request by request."""
    measured = [s for s in samples if not s.warmup]
    ok = [s for s in measured if s.succeeded]
    if tool == "vllm":
        return _legacy_vllm(measured, ok)
    if tool == "guidellm":
        return _legacy_guidellm(measured, ok)
    return _legacy_aiperf(ok)


# --- the run -----------------------------------------------------------------------------


async def make_run(conn: asyncpg.Connection) -> uuid.UUID:
    """A team, endpoint, deployment, job and finished run, as insert_finished_run writes."""
    team = await conn.fetchval(
        "INSERT INTO teams (id, name, created_at) VALUES (gen_random_uuid(), 'bench', now())"
        " RETURNING id"
    )
    endpoint = await conn.fetchval(
        "INSERT INTO endpoints (id, team_id, name, base_url, api, model, engine, gpu_count,"
        " created_at) VALUES (gen_random_uuid(), $1, 'bench', 'http://192.0.2.1:8000/v1',"
        " 'openai-chat', 'llama-3.1-8b', 'vllm', 1, now()) RETURNING id",
        team,
    )
    job = await conn.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at, finished_at) VALUES (gen_random_uuid(), $1, $2,"
        " 'succeeded', '{}', '{\"mode\": \"concurrency\"}', 1, 1, now(), now()) RETURNING id",
        team,
        endpoint,
    )
    deployment = await conn.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, endpoint)
    run: uuid.UUID = await conn.fetchval(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id, level_index,"
        " created_at, level, mode, status, requests_total, requests_succeeded,"
        " requests_failed) VALUES (gen_random_uuid(), $1, $2, $3, $4, 0, now(), 64.0,"
        " 'concurrency', 'succeeded', 0, 0, 0) RETURNING id",
        team,
        job,
        endpoint,
        deployment,
    )
    return run


def sample_rows(
    run_id: uuid.UUID, samples: int, chunks: int, rng: np.random.Generator
) -> Iterator[tuple[Any, ...]]:
    """Requests at concurrency ~64: TTFT ~80 ms, ~20 ms between events (a few 2-token
    events), 1% timeouts without any event."""
    t_sched = np.cumsum(rng.exponential(0.0125, samples))
    t_send = t_sched + rng.exponential(0.0005, samples)
    ttft = 80.0 * rng.lognormal(0.0, 0.25, samples)
    gaps = rng.normal(20.0, 3.0, (samples, chunks - 1)).clip(1.0)
    times = np.concatenate([ttft[:, None], ttft[:, None] + np.cumsum(gaps, axis=1)], axis=1)
    tokens = 1 + (rng.random((samples, chunks)) < 0.1)
    tokens[:, 0] = 1 + (rng.random(samples) < 0.3)
    failed = rng.random(samples) < 0.01
    usage = rng.random(samples) < 0.5
    tail = rng.exponential(5.0, samples)
    for i in range(samples):
        if failed[i]:
            yield (run_id, i, i < 8, float(t_sched[i]), float(t_send[i]), None, None, None,
                   30_000.0, 512, 0, "none", None, "timeout", [], None)  # fmt: skip
            continue
        row_times = times[i].tolist()
        n_out = int(tokens[i].sum())
        e2e = row_times[-1] + float(tail[i])
        tpot = (row_times[-1] - row_times[0]) / (n_out - 1)
        yield (run_id, i, i < 8, float(t_sched[i]), float(t_send[i]), row_times[0] * 0.9,
               row_times[0], tpot, e2e, 512, n_out, "usage", 200, None, row_times,
               tokens[i].tolist() if usage[i] else None)  # fmt: skip


async def load(database: str, args: argparse.Namespace) -> uuid.UUID:
    conn = await asyncpg.connect(database)
    try:
        run_id = await make_run(conn)
        started = time.perf_counter()
        rows = sample_rows(run_id, args.samples, args.chunks, np.random.default_rng(args.seed))
        await conn.copy_records_to_table("request_samples", records=rows, columns=SAMPLE_COLUMNS)
        await conn.execute("VACUUM ANALYZE request_samples")
        size = await conn.fetchval("SELECT pg_size_pretty(pg_table_size('request_samples'))")
        print(
            f"# loaded {args.samples:,} samples x {args.chunks} chunks in "
            f"{time.perf_counter() - started:.1f} s (request_samples {size})",
            flush=True,
        )
    finally:
        await conn.close()
    return run_id


# --- the measurement -----------------------------------------------------------------------


def same(a: ToolFigures, b: ToolFigures) -> list[str]:
    """The figures where a and b differ beyond float rounding (sums in another order)."""
    out = []
    for name in ("tpot_ms", "itl_ms"):
        x, y = getattr(a, name), getattr(b, name)
        for key in STAT_KEYS:
            if (x[key] is None) != (y[key] is None) or (
                x[key] is not None and not math.isclose(x[key], y[key], rel_tol=1e-9)
            ):
                out.append(f"{name}.{key} {x[key]} != {y[key]}")
    for name in ("output_tokens_per_s", "requests_per_s", "duration_s"):
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None) or (x is not None and not math.isclose(x, y, rel_tol=1e-12)):
            out.append(f"{name} {x} != {y}")
    if (a.differences, a.sources, a.metric_names) != (b.differences, b.sources, b.metric_names):
        out.append("texts differ")
    return out


def block_of(figures: ToolFigures) -> Definitions:
    """The response block of some figures, built as DefinitionsService.block builds it, so
    that both paths' block() times include the same conversion."""
    return Definitions(
        tool=figures.tool,
        tpot_ms=msgspec.convert(figures.tpot_ms, Distribution),
        itl_ms=msgspec.convert(figures.itl_ms, Distribution),
        output_tokens_per_s=figures.output_tokens_per_s,
        requests_per_s=figures.requests_per_s,
        duration_s=figures.duration_s,
        metric_names=figures.metric_names,
        reported_stats=list(figures.reported_stats),
        differences=list(figures.differences),
        sources=list(figures.sources),
    )


async def timed(
    sessions: async_sessionmaker[AsyncSession],
    iterations: int,
    call: Callable[[AsyncSession], Awaitable[Any]],
) -> list[float]:
    """ms per call over a fresh session each (as a request gets), after one warm-up."""
    timings = []
    for i in range(iterations + 1):
        async with sessions() as session:
            started = time.perf_counter()
            await call(session)
            elapsed = (time.perf_counter() - started) * 1000
        if i:
            timings.append(elapsed)
    return timings


async def measure(url: str, run_id: uuid.UUID, iterations: int) -> None:
    engine = create_async_engine(url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        async with sessions() as session:
            team_id = (await session.execute(select(Run.team_id).where(Run.id == run_id))).one()[0]
        print(f"\n# ms per call, p50 (max) of {iterations} after one warm-up")
        head = f"{'tool':9} {'path':7} {'block()':>16} {'read':>9} {'recompute':>10}"
        print(head)
        for tool in TOOLS:
            async with sessions() as session:
                columns = await DefinitionsService(session, team_id).samples(
                    run_id, chunk_times=tool in READS_CHUNK_TIMES
                )
                objects = await legacy_samples(session, run_id)
            diff = same(recompute(tool, columns), legacy_recompute(tool, objects))
            assert not diff, f"{tool}: {diff}"

            async def new_block(session: AsyncSession, tool: Tool = tool) -> Any:
                return await DefinitionsService(session, team_id).block(run_id, tool)

            async def old_block(session: AsyncSession, tool: Tool = tool) -> Any:
                return block_of(legacy_recompute(tool, await legacy_samples(session, run_id)))

            async def new_read(session: AsyncSession, tool: Tool = tool) -> Any:
                return await DefinitionsService(session, team_id).samples(
                    run_id, chunk_times=tool in READS_CHUNK_TIMES
                )

            async def old_read(session: AsyncSession) -> Any:
                return await legacy_samples(session, run_id)

            for path, block, read, compute in (
                ("before", old_block, old_read, partial(legacy_recompute, tool, objects)),
                ("after", new_block, new_read, partial(recompute, tool, columns)),
            ):
                total = await timed(sessions, iterations, block)
                reads = await timed(sessions, iterations, read)
                computes = []
                for _ in range(iterations):
                    started = time.perf_counter()
                    compute()
                    computes.append((time.perf_counter() - started) * 1000)
                p50 = statistics.median(total)
                print(
                    f"{tool:9} {path:7} {p50:>8.1f} ({max(total):>5.0f})"
                    f" {statistics.median(reads):>9.1f} {statistics.median(computes):>10.1f}",
                    flush=True,
                )
        print("\n# before and after give the same figures (rel. 1e-9) for every tool")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with scratch_database(args.pg, keep=args.keep) as db:
        print(f"# bench/definitions.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: --samples "
              f"{args.samples} --chunks {args.chunks} on {os.cpu_count()} CPUs, database "
              f"{db.name}", flush=True)  # fmt: skip
        run_id = asyncio.run(load(db.dsn, args))
        asyncio.run(measure(db.url, run_id, args.iterations))


if __name__ == "__main__":
    main()
