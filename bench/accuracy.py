"""How far are the worker's timings from what the server did? Prints figures; asserts nothing.

`.venv/bin/python bench/accuracy.py` runs the worker's load generator (closed loop, slot
transport, SSE parser, reading-side health: what a job runs) in this process against an
`infercost sim` child process that records, per request, when it received it and when it
wrote each content event (SimConfig.record_writes, GET /stats `writes`). Both read
CLOCK_MONOTONIC (the client's perf_counter, the simulator's loop time), so per request and
per event:

- TTFT error = client TTFT (t_first - t_send) - server TTFT (first content write - arrival);
- ITL error = each gap between the client's stamps of consecutive content events - the gap
  between the server's writes of them;
- stamp - write = the client's stamp of an event - the server's write of it (loopback
  transit, the event loop's delay in reading the socket, nothing else: the stamp is taken in
  the transport's data callback);
- arrive - send = the server's arrival time of a request - the client's t_send: how long the
  request took to reach the server's handler (a busy server takes it late). TTFT error is
  this plus the first event's stamp - write, so a TTFT error with a small stamp - write is
  the server's delay in taking the request, which a client's TTFT rightly includes;

and beside them the reading side's own health (workers/loadgen/health.py): read lag (age of
the bytes when the parser took them: how late a stamp taken when the coroutine woke, as
before 2026-12-03, would have been), event-loop lag, the peak CPU share, and whether the run
said `client_bound` and what it spoils. The simulator's lateness against its own schedule
is printed too; it does not enter the errors (they are against what it actually did).
`--levels` picks the stream counts, `--tokens` the length of each response.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from time import perf_counter_ns
from typing import Any

import httpx
import msgspec

from infercost.figures.metrics import distribution, summarize
from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.health import ClientHealth
from workers.loadgen.stream import RawRequest, Target, open_connections
from workers.loadgen.transport import load_client

TTFT_MS = 50.0
ITL_MS = 10.0
PROMPT = " ".join(["word"] * 128)


def _bodies(count: int, tokens: int) -> list[bytes]:
    """Request bodies named r0, r1, ... in `user`, which the simulator keys its record by."""
    return [
        msgspec.json.encode(
            {
                "model": "sim-model",
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
                "user": f"r{seq}",
            }
        )
        for seq in range(count)
    ]


async def _level(
    base_url: str, conc: int, warmup: int, measured: int, tokens: int
) -> tuple[list[RawRequest], dict[str, Any], float]:
    """One closed-loop level; its requests, reading health and CPU share."""
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 300.0)
    bodies = _bodies(warmup + measured, tokens)
    # Users start spread over one request's duration: a steady state, not a lockstep herd.
    ramp_s = (TTFT_MS + (tokens - 1) * ITL_MS) / 1000.0
    plan = LevelPlan(
        conc, warmup, measured, True, lambda s: (bodies[s], 128), lambda _r: None, ramp_s=ramp_s
    )
    done: list[RawRequest] = []
    health = ClientHealth()
    async with load_client(conc, health=health) as client:
        await open_connections(client, target, conc)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        health.start()
        await run_closed_loop(client, target, plan, done)
        reading = await health.stop()
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    return done, reading, cpu


def _sim(sim: SimProcess, path: str, *, post: bool = False) -> dict[str, Any]:
    with httpx.Client(base_url=sim.base_url, timeout=30.0) as http:
        response = http.post(path) if post else http.get(path)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def _errors(done: list[RawRequest], writes: dict[str, list[float]]) -> dict[str, list[float]]:
    """Per measured successful request: TTFT error, ITL errors, stamp - write, arrive - send
    (ms)."""
    arrive: list[float] = []
    ttft: list[float] = []
    itl: list[float] = []
    stamp: list[float] = []
    for rec in done:
        record = writes.get(f"r{rec.seq}")
        if rec.warmup or rec.error_class is not None or record is None:
            continue
        arrival, server = record[0], record[1:]
        client = [t * 1e-9 for t in rec.chunk_ns]
        if len(client) != len(server):
            raise SystemExit(
                f"request {rec.seq}: {len(client)} content events stamped, {len(server)} written"
            )
        ttft.append(((client[0] - rec.t_send * 1e-9) - (server[0] - arrival)) * 1e3)
        arrive.append((arrival - rec.t_send * 1e-9) * 1e3)
        stamp.extend((c - s) * 1e3 for c, s in zip(client, server, strict=True))
        itl.extend(
            ((client[k + 1] - client[k]) - (server[k + 1] - server[k])) * 1e3
            for k in range(len(client) - 1)
        )
    return {"ttft": ttft, "itl": itl, "stamp": stamp, "arrive": arrive}


def _pair(values: list[float]) -> str:
    """p50/p99 of `values` (ms) in 15 characters."""
    d = distribution(values)
    if d["p50"] is None:
        return f"{'-':>15}"
    return f"{float(d['p50']):>+7.3f}/{float(d['p99'] or 0):>+7.3f}"


def _lag(reading: dict[str, Any], name: str) -> str:
    p50, p99 = reading[f"{name}_p50_ms"], reading[f"{name}_p99_ms"]
    return f"{p50 or 0:>7.3f}/{p99 or 0:>7.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", default="1,64,256,1024", help="streams per level")
    parser.add_argument("--tokens", type=int, default=32, help="content events per response")
    parser.add_argument("--rounds", type=int, default=2, help="measured requests per user")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    print(
        f"# bench/accuracy.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: sim fixed ttft="
        f"{TTFT_MS:g} ms itl={ITL_MS:g} ms, {args.tokens} tokens per request, closed loop, "
        f"warm-up one request per user, then max(20, {args.rounds} x streams) measured; "
        "errors are client minus server (ms), p50 / p99"
    )
    print(
        f"{'streams':>7} {'reqs':>5} {'ttft err':>15} {'itl err':>15} {'stamp-write':>15} "
        f"{'arrive-send':>15} "
        f"{'read lag':>15} {'loop lag':>15} {'cpu':>5} {'peak':>5} {'resent':>6} "
        f"{'bound':>5} {'sim late p99':>12}  spoils"
    )
    config = SimConfig(
        port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model", record_writes=True
    )
    sim = start_sim_process(config)
    try:
        for conc in levels:
            _sim(sim, "/stats/reset", post=True)
            measured = max(20, args.rounds * conc)
            origin = perf_counter_ns()
            done, reading, cpu = asyncio.run(
                _level(sim.openai_base_url, conc, conc, measured, args.tokens)
            )
            stats = _sim(sim, "/stats")
            errors = _errors(done, stats["writes"])
            figures = summarize(
                [r.timing(origin) for r in done],
                target_concurrency=conc,
                client_cpu_util=cpu,
                reading=reading,
            )

            late = stats["lateness"]["p99_ms"]
            print(
                f"{conc:>7} {figures.requests_succeeded:>5} {_pair(errors['ttft'])} "
                f"{_pair(errors['itl'])} {_pair(errors['stamp'])} {_pair(errors['arrive'])} "
                f"{_lag(reading, 'read_lag')} "
                f"{_lag(reading, 'loop_lag')} {cpu:>5.2f} {reading['cpu_util_peak'] or 0:>5.2f} "
                f"{reading['resent']:>6} {figures.client_bound!s:>5} {late or 0:>12.3f}  "
                f"{','.join(figures.client['spoils']) or '-'}"
                + (f"  failed {figures.requests_failed}" if figures.requests_failed else "")
            )
            time.sleep(0.5)
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
