"""What does the team-scope guard cost a read? Prints figures; asserts nothing.

`.venv/bin/python bench/scope.py [--calls 3000]`

1. Creates a scratch database on the Postgres named by --pg (default INFERCOST_TEST_PG, else
   postgresql://postgres@127.0.0.1:5432/postgres) and builds it by running the migrations.
2. Times three reads as the API makes them, --calls times each on the application's
   sessions (infercost.db.engine.make_sessionmaker, guarded) and on plain SQLAlchemy
   sessions on an engine of their own (no guard), one of each in turn, so a busy machine's
   swings hit both alike: a job by id (JobRepository.get_job), a page of jobs with its count
   (two statements), and the comparison (two statements, one a CTE chain run on the
   session's connection, which the engine's hook checks). Each read's wall time and this
   process's CPU time (what the guard adds) are kept; medians are printed. The tables are
   empty: the round trip and the ORM's work are the same with and without the guard.
3. Times the check alone on statements of the same reads: the first time a statement shape
   is seen (the walk over its tree), and every later time: the statement's cache key (which
   SQLAlchemy's compiled-statement cache computes anyway and keeps on the statement, so a
   read does not pay it twice) and the rest (the verdict looked up by it).
4. Drops the database unless --keep.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from scratch import add_database_options, scratch_database
from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.comparisons.repository import ComparisonFilter, _deployments, _groups, compare
from infercost.db.engine import make_engine, make_sessionmaker
from infercost.db.scope import check, owned_by, readable, unscoped_tables
from infercost.jobs.models import Job
from infercost.jobs.repository import JobRepository

Read = Callable[[AsyncSession, uuid.UUID], Awaitable[Any]]


async def get_job(session: AsyncSession, team: uuid.UUID) -> Any:
    return await JobRepository(session).get_job(team, uuid.uuid4())


async def page_jobs(session: AsyncSession, team: uuid.UUID) -> Any:
    return await JobRepository(session).page_jobs(team, limit=50, offset=0)


async def comparison(session: AsyncSession, team: uuid.UUID) -> Any:
    return await compare(session, team, ComparisonFilter(), figures=["ttft_p50_ms"], limit=50)


READS: dict[str, Read] = {"job by id": get_job, "page of jobs": page_jobs, "compare": comparison}


async def paired_us(
    guarded: async_sessionmaker[AsyncSession],
    plain: async_sessionmaker[AsyncSession],
    read: Read,
    calls: int,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """`calls` reads on each kind of session, one of each in turn (which goes first
    alternates), so a busy machine's swings hit both alike: each read's wall time and this
    process's CPU time (what the guard adds), in µs, plain then guarded."""
    team = uuid.uuid4()
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    async with guarded() as with_guard, plain() as without:
        session = {True: with_guard, False: without}
        for s in session.values():
            await read(s, team)  # the connection and the statement's first compile
        for n in range(calls):
            for kind in (n % 2 == 0, n % 2 == 1):
                w, c = time.perf_counter(), time.process_time()
                await read(session[kind], team)
                cpu[kind].append((time.process_time() - c) * 1e6)
                wall[kind].append((time.perf_counter() - w) * 1e6)
    return wall[False], wall[True], cpu[False], cpu[True]


async def timed_reads(url: str, calls: int) -> None:
    guarded_engine, plain_engine = make_engine(url, pool_size=1), make_engine(url, pool_size=1)
    guarded = make_sessionmaker(guarded_engine)
    plain = async_sessionmaker(plain_engine, expire_on_commit=False)
    med = statistics.median
    try:
        print(f"medians of {calls} reads each, µs: wall time, then this process's CPU time")
        print(
            f"{'read':<14} {'wall':>7} {'guarded':>8} {'cpu':>7} {'guarded':>8} "
            f"{'cpu cost':>9} {'cost %':>7}"
        )
        for name, read in READS.items():
            wall_a, wall_b, cpu_a, cpu_b = await paired_us(guarded, plain, read, calls)
            a, b = med(cpu_a), med(cpu_b)
            print(
                f"{name:<14} {med(wall_a):>7.0f} {med(wall_b):>8.0f} {a:>7.0f} {b:>8.0f} "
                f"{b - a:>9.1f} {(b - a) / a * 100:>6.1f}%"
            )
    finally:
        await guarded_engine.dispose()
        await plain_engine.dispose()


def _median_us(build: Callable[[], Any], measure: Callable[[Any], Any], repeat: int) -> float:
    """Median time of `measure` on a freshly built statement, in µs."""
    times = []
    for _ in range(repeat):
        statement = build()
        start = time.perf_counter()
        measure(statement)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _rest_us(build: Callable[[], Any], repeat: int) -> float:
    """Median time of the check beyond the statement's cache key (computed first, as the
    compiled-statement cache computes it), in µs, once the shape's verdict is kept."""
    check(build(), {})
    times = []
    for _ in range(repeat):
        statement = build()
        statement._generate_cache_key()
        start = time.perf_counter()
        check(statement, {})
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def timed_checks(repeat: int) -> None:
    team = uuid.uuid4()
    groups = _groups(
        team,
        ComparisonFilter(),
        _deployments(team),
        figures=["output_tokens_per_s"],
        group_by="deployment",
        aggregate="median",
    )
    statements: dict[str, Callable[[], Any]] = {
        "job by id": lambda: readable(Job, team).where(Job.id == team),
        "count of jobs": lambda: (
            select(func.count()).select_from(Job).where(owned_by(Job, team), Job.status == "queued")
        ),
        "compare's CTEs": lambda: select(
            func.count(), func.array_agg(distinct(groups.c.workload_fingerprint))
        ),
    }
    print(
        "the check alone, µs a statement: the walk when a shape is first seen; later, the "
        "cache key (which the\ncompiled-statement cache computes anyway and reuses) and "
        "the rest of the check apart"
    )
    print(f"{'statement':<15} {'first seen':>11} {'cache key':>10} {'rest':>6}")
    for name, build in statements.items():
        first = _median_us(build, unscoped_tables, repeat)
        key = _median_us(build, lambda s: s._generate_cache_key(), repeat)
        rest = _rest_us(build, repeat)
        print(f"{name:<15} {first:>11.1f} {key:>10.1f} {rest:>6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    with scratch_database(args.pg, keep=args.keep) as db:
        asyncio.run(timed_reads(db.url, args.calls))
    timed_checks(1000)


if __name__ == "__main__":
    main()
