"""How accurate and how cheap is the load generator? Prints figures; asserts nothing.

Runs the worker's own closed-loop generator against `infercost sim --mode fixed` on loopback
(ground truth: TTFT and ITL exactly as configured) at several concurrencies, once on uvloop
(what workers use) and once on the default asyncio loop (the baseline), and prints per level:
TTFT p50 and TPOT p50 error against ground truth, queue delay p99, and the client's CPU time
per request. Usage: `.venv/bin/python bench/loadgen.py [--requests 200] [--levels 1,16,64,256]`.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import numpy as np

from infercost.metrics import summarize
from infercost.sim.config import SimConfig
from infercost.sim.process import start_sim_process
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.stream import RawRequest, Target, request_body
from workers.runtime import new_event_loop

TTFT_MS = 50.0
ITL_MS = 10.0
OUTPUT_TOKENS = 64


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _level(base_url: str, concurrency: int, requests: int) -> dict[str, float]:
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    prompt = " ".join(["word"] * 128)
    body = request_body(
        target, prompt, OUTPUT_TOKENS, stream=True, ignore_eos=True, temperature=None
    )
    warmup = min(concurrency, 16)
    plan = LevelPlan(
        concurrency=concurrency,
        warmup=warmup,
        measured=requests,
        stream=True,
        make_request=lambda _seq: (body, 128),
        on_done=lambda _rec: None,
    )
    limits = httpx.Limits(max_connections=1024, max_keepalive_connections=1024)
    async with httpx.AsyncClient(limits=limits, timeout=None) as client:
        done: list[RawRequest] = []
        cpu0, wall0, origin = _cpu_s(), time.perf_counter(), time.perf_counter_ns()
        await run_closed_loop(client, target, plan, done)
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    figures = summarize([r.timing(origin) for r in done], target_concurrency=concurrency)
    return {
        "ttft_err_ms": (figures.stat("ttft_ms", "p50") or 0) - TTFT_MS,
        "ttft_p99_err_ms": (figures.stat("ttft_ms", "p99") or 0) - TTFT_MS,
        "tpot_err_ms": (figures.stat("tpot_ms", "p50") or 0) - ITL_MS,
        "queue_p99_ms": figures.stat("queue_delay_ms", "p99") or 0.0,
        "cpu_ms_per_req": cpu / len(done) * 1000,
        "cpu_util": cpu / wall,
        "failed": float(figures.requests_failed),
        "client_bound": float(figures.client_bound),
    }


def _run(
    loop_factory: Callable[[], asyncio.AbstractEventLoop], coro_fn: Callable[[], object]
) -> object:
    loop = loop_factory()
    try:
        return loop.run_until_complete(coro_fn())  # type: ignore[arg-type]
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="measured requests per level")
    parser.add_argument("--levels", default="1,16,64,256")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    sim = start_sim_process(SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model"))
    try:
        print(
            f"# bench/loadgen.py  {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  "
            f"sim fixed ttft={TTFT_MS} ms itl={ITL_MS} ms, {OUTPUT_TOKENS} tokens, "
            f"{args.requests} measured requests per level"
        )
        header = (
            f"{'loop':8} {'conc':>5} {'ttft p50 err':>13} {'ttft p99 err':>13} "
            f"{'tpot p50 err':>13} {'queue p99':>10} {'cpu/req':>9} {'cpu util':>9} {'bound':>6}"
        )
        print(header)
        results: dict[tuple[str, int], dict[str, float]] = {}
        for name, factory in (("uvloop", new_event_loop), ("asyncio", asyncio.new_event_loop)):
            for conc in levels:
                r = _run(factory, lambda c=conc: _level(sim.openai_base_url, c, args.requests))
                assert isinstance(r, dict)
                results[(name, conc)] = r
                print(
                    f"{name:8} {conc:>5} {r['ttft_err_ms']:>+10.2f} ms {r['ttft_p99_err_ms']:>+10.2f} ms "
                    f"{r['tpot_err_ms']:>+10.3f} ms {r['queue_p99_ms']:>7.2f} ms "
                    f"{r['cpu_ms_per_req']:>6.2f} ms {r['cpu_util']:>9.2f} {bool(r['client_bound'])!s:>6}"
                )
        print("\n# ratio asyncio / uvloop, client CPU per request")
        for conc in levels:
            ratio = (
                results[("asyncio", conc)]["cpu_ms_per_req"]
                / results[("uvloop", conc)]["cpu_ms_per_req"]
            )
            print(f"conc {conc:>4}: {ratio:.2f}x")
        errs = np.array([results[("uvloop", c)]["ttft_err_ms"] for c in levels])
        print(f"\n# uvloop TTFT p50 error across levels: max {errs.max():+.2f} ms")
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
