"""How accurate and how cheap is the load generator? Prints figures; asserts nothing.

Runs against `infercost sim --mode fixed` on loopback, whose TTFT and inter-token latency are
ground truth, at several concurrencies, twice per level:

- infercost: the worker's own closed loop (httpx, SSE parsing, timing; workers/loadgen/);
- baseline: a minimal HTTP/1.1 client on raw asyncio streams, the floor any Python client
  on this machine could reach against this simulator.

Per level it prints TTFT p50/p99 and TPOT p50 error against ground truth, queue delay p99,
and the client's CPU time per request, then the ratio of the two clients' CPU per request.
Usage: `.venv/bin/python bench/loadgen.py [--requests 100] [--levels 1,16,64,256]`.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import msgspec

from infercost.metrics import RequestTiming, summarize
from infercost.sim.config import SimConfig
from infercost.sim.process import start_sim_process
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.stream import RawRequest, Target, open_connections, request_body
from workers.loadgen.transport import load_client

TTFT_MS = 50.0
ITL_MS = 10.0
OUTPUT_TOKENS = 64
PROMPT = " ".join(["word"] * 128)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _infercost(base_url: str, conc: int, warmup: int, measured: int) -> list[RequestTiming]:
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    body = request_body(
        target, PROMPT, OUTPUT_TOKENS, stream=True, ignore_eos=True, temperature=None
    )
    plan = LevelPlan(conc, warmup, measured, True, lambda _s: (body, 128), lambda _r: None)
    done: list[RawRequest] = []
    origin = time.perf_counter_ns()
    async with load_client(1024) as client:
        await open_connections(client, target, conc)
        origin = time.perf_counter_ns()
        await run_closed_loop(client, target, plan, done)
    return [r.timing(origin) for r in done]


async def _baseline(base_url: str, conc: int, warmup: int, measured: int) -> list[RequestTiming]:
    """The same closed loop on raw sockets: one keep-alive connection per user."""
    host, port = base_url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    payload = {
        "model": "sim-model", "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": OUTPUT_TOKENS, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    body = msgspec.json.encode(payload)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    origin = time.perf_counter_ns()
    timings: list[RequestTiming] = []
    next_seq = 0
    total = warmup + measured

    async def user() -> None:
        nonlocal next_seq
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while next_seq < total:
                seq, next_seq = next_seq, next_seq + 1
                t_send = time.perf_counter_ns()
                writer.write(request)
                chunks: list[float] = []
                while True:
                    data = await reader.read(65536)
                    now = (time.perf_counter_ns() - origin) / 1e9
                    chunks.extend(
                        now for _ in range(data.count(b'"content":"') - data.count(b'"content":""'))
                    )
                    if data.endswith(b"0\r\n\r\n"):
                        break
                t = (t_send - origin) / 1e9
                timings.append(
                    RequestTiming(
                        seq, seq < warmup, t, t, t_end=now, chunk_times=chunks, n_out=len(chunks)
                    )
                )
        finally:
            writer.close()

    await asyncio.gather(*(user() for _ in range(conc)))
    return timings


Client = Callable[[str, int, int, int], Awaitable[list[RequestTiming]]]


def _measure(client: Client, base_url: str, conc: int, measured: int) -> dict[str, float]:
    warmup = min(conc, 16)
    loop = asyncio.new_event_loop()
    try:
        cpu0, wall0 = _cpu_s(), time.perf_counter()
        timings = loop.run_until_complete(client(base_url, conc, warmup, measured))
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
    f = summarize(timings, target_concurrency=conc)
    return {
        "ttft_err": (f.stat("ttft_ms", "p50") or 0) - TTFT_MS,
        "ttft99_err": (f.stat("ttft_ms", "p99") or 0) - TTFT_MS,
        "tpot_err": (f.stat("tpot_ms", "p50") or 0) - ITL_MS,
        "queue99": f.stat("queue_delay_ms", "p99") or 0.0,
        "cpu_ms": cpu / len(timings) * 1000,
        "cpu_util": cpu / wall,
        "bound": float(f.client_bound),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="measured requests per level")
    parser.add_argument("--levels", default="1,16,64,256")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    clients: dict[str, Client] = {"infercost": _infercost, "baseline": _baseline}

    sim = start_sim_process(SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model"))
    try:
        print(
            f"# bench/loadgen.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: sim fixed "
            f"ttft={TTFT_MS:g} ms itl={ITL_MS:g} ms, {OUTPUT_TOKENS} tokens, "
            f"{args.requests} measured requests per level (warm-up: min(level, 16))"
        )
        print(
            f"{'client':10} {'conc':>5} {'ttft p50 err':>13} {'ttft p99 err':>13} {'tpot p50 err':>13} "
            f"{'queue p99':>10} {'cpu/req':>9} {'cpu util':>9} {'client_bound':>13}"
        )
        results: dict[tuple[str, int], dict[str, float]] = {}
        for conc in levels:
            for name, client in clients.items():
                r = results[(name, conc)] = _measure(
                    client, sim.openai_base_url, conc, args.requests
                )
                print(
                    f"{name:10} {conc:>5} {r['ttft_err']:>+10.2f} ms {r['ttft99_err']:>+10.2f} ms "
                    f"{r['tpot_err']:>+10.3f} ms {r['queue99']:>7.2f} ms {r['cpu_ms']:>6.2f} ms "
                    f"{r['cpu_util']:>9.2f} {bool(r['bound'])!s:>13}"
                )
        print("\n# infercost / baseline, client CPU per request")
        for conc in levels:
            ratio = results[("infercost", conc)]["cpu_ms"] / results[("baseline", conc)]["cpu_ms"]
            print(f"conc {conc:>4}: {ratio:.2f}x")
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
