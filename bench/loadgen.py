"""How fast, how cheap and how accurate is the load generator? Prints figures; asserts nothing.

One command, `.venv/bin/python bench/loadgen.py`, runs everything against `infercost sim`
child processes on loopback and ends with each target and whether it was met:

0. SSE parsing: CPU per event of the stream reader (infercost/engines/reader.py: the WHATWG
   parser, then a brief decode of what judges the event), of the same reader decoding every
   event in full, and of a byte scan in Python (no decode: the approach measured and not
   taken), on reads of 1 and 16 of the simulator's events.
1. capacity: output tokens/s that one worker process's load generator receives and records
   at concurrency 256 and 1024, from a simulator sending as fast as it can (ttft 0, itl 0,
   --burst events per write), next to a minimal raw-socket asyncio reader on the same
   simulator (the practical limit of this machine). Tokens and concurrency are counted over
   a fixed window in which every user is busy: tokens whose arrival fell in it, and the
   time-weighted number of requests in flight (docs/figures.md's inflight mean).
2. client cost: the worker's CPU time (user + system, getrusage) per received token over the
   same window.
3. accuracy: with 50 ms TTFT and 10 ms ITL injected, at concurrency 1, 64 and 256, measured
   TTFT and ITL (docs/figures.md definitions) minus the injected values, p50 and p99, and the
   level's verdict as a job's run would give it (client health with the pause watch: the
   share of events exposed to pauses over 5 ms, the longest loop stall). Users start
   spread over one request's duration (LevelPlan.ramp_s), the steady state of a closed loop;
   all at once, a deterministic server would answer them in lockstep.
4. simulator fidelity: over the same requests, the simulator's own lateness against its
   schedule (its GET /stats), so a client error is never blamed on the server or the reverse.

Each infercost row names the HTTP transport it ran on: `slots` (workers/loadgen/transport.py,
what workers use: a streamed request written straight to the slot's connection),
`slots-httpx` (the same connections with each request going through httpx's client, request
and response objects, as before 2026-12-05) and `httpcore` (one httpcore pool per slot, as
before 2026-12-02), so one run shows before and after; `--aiohttp` adds a capacity row of the
same closed loop and reader on aiohttp's client (a bench-only extra, `pip install -e
'.[bench]'`), so the choice of HTTP stack is measured. `--quick` runs shorter windows, for a smoke test;
`--skip parse,capacity,accuracy` leaves sections out. The machine should be otherwise idle:
client and simulator are two processes, and on two cores anything else running takes CPU
from one of them, which shows up as lateness in both (the simulator's own is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import resource
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from time import perf_counter_ns
from typing import Any

import httpx
import msgspec

from infercost.engines.reader import StreamReader
from infercost.figures.metrics import RequestTiming, inflight_mean, summarize
from infercost.telemetry import Scraper
from sim import wire
from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.health import ClientHealth
from workers.loadgen.stream import RawRequest, Target, open_connections, request_body
from workers.loadgen.transport import SLOT, SlotTransport, load_client

TTFT_MS = 50.0
ITL_MS = 10.0
ACC_TOKENS = 64
CAP_TOKENS = 256
CAP_BURST = 16
PROMPT = " ".join(["word"] * 128)

# Targets of issue 3 ("Speed and accuracy"), tightened by issue 28 ("One stream reader"):
# at 256 streams 70% of the raw reader and 3 us of CPU a token, at 1024 50%.
CAP_SHARE_TARGET = {256: 0.70, 1024: 0.50}  # infercost's rate / the raw reader's
CONC_HELD_TARGET = 0.95  # mean concurrency / requested
CPU_US_TARGET = {256: 3.0, 1024: 15.0}  # worker CPU per received token
P50_ERR_TARGET_MS = 1.0
P99_ERR_TARGET_MS = 5.0
SIM_P99_TARGET_MS = 1.0

ClientFactory = Callable[[int], AbstractAsyncContextManager[httpx.AsyncClient]]


class _HttpcoreSlots(httpx.AsyncBaseTransport):
    """The load transport before this benchmark's changes: one httpcore pool of one
    connection per slot; requests without a slot share a pool of `shared_limit`."""

    def __init__(self, shared_limit: int) -> None:
        limits = httpx.Limits(max_connections=shared_limit, max_keepalive_connections=shared_limit)
        self._pools: dict[int | None, httpx.AsyncHTTPTransport] = {
            None: httpx.AsyncHTTPTransport(limits=limits)
        }

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        slot = request.extensions.get(SLOT)
        pool = self._pools.get(slot)
        if pool is None:
            one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            pool = self._pools[slot] = httpx.AsyncHTTPTransport(limits=one)
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()


def _httpcore_client(max_concurrency: int) -> httpx.AsyncClient:
    """The load client with the previous transport (`_HttpcoreSlots`)."""
    return httpx.AsyncClient(
        transport=_HttpcoreSlots(max_concurrency),
        timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None),
        follow_redirects=False,
    )


def _slots_httpx_client(max_concurrency: int) -> httpx.AsyncClient:
    """The slot transport behind a plain httpx client: every request builds httpx's request
    and response objects and goes through its client (the production path before
    2026-12-05), its body still read as the slot's stamped reads."""
    return httpx.AsyncClient(
        transport=SlotTransport(shared_limit=max_concurrency),
        timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None),
        follow_redirects=False,
    )


CLIENTS: dict[str, ClientFactory] = {
    "slots": load_client,
    "slots-httpx": _slots_httpx_client,
    "httpcore": _httpcore_client,
}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run(coro: Awaitable[Any]) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _host_port(base_url: str) -> tuple[str, int]:
    host, port = base_url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    return host, int(port)


def _raw_request(max_tokens: int) -> bytes:
    payload = {
        "model": "sim-model", "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    body = msgspec.json.encode(payload)
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


# --- capacity ---------------------------------------------------------------------------------


@dataclass
class Capacity:
    tokens_per_s: float
    mean_concurrency: float
    cpu_us_per_token: float
    cpu_util: float
    errors: int
    error: str | None = None


class _Window:
    """Marks [t0, t1] (perf_counter_ns) and the process CPU time at each end, from a thread:
    a busy event loop runs its timers late, a sleeping thread wakes on time."""

    def __init__(self, warm_s: float, window_s: float) -> None:
        self.warm_s, self.window_s = warm_s, window_s
        self.t0 = self.t1 = 0
        self.cpu0 = self.cpu1 = 0.0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Call as the load starts: t0 is warm_s from now, t1 window_s after t0."""
        base = perf_counter_ns()

        def marks() -> None:
            time.sleep(max(0.0, (base - perf_counter_ns()) / 1e9 + self.warm_s))
            self.t0, self.cpu0 = perf_counter_ns(), _cpu_s()
            time.sleep(max(0.0, (base - perf_counter_ns()) / 1e9 + self.warm_s + self.window_s))
            self.t1, self.cpu1 = perf_counter_ns(), _cpu_s()

        self._thread = threading.Thread(target=marks, daemon=True)
        self._thread.start()

    def join(self) -> None:
        assert self._thread is not None
        self._thread.join()

    def result(
        self, arrivals: list[tuple[int, int]], spans: list[tuple[int, int]], errors: int
    ) -> Capacity:
        """arrivals: (ns, tokens) per read or event; spans: (t_send, t_end) per request."""
        tokens = sum(n for t, n in arrivals if self.t0 <= t <= self.t1)
        seconds = (self.t1 - self.t0) / 1e9
        cpu = self.cpu1 - self.cpu0
        timings = [RequestTiming(0, False, s / 1e9, s / 1e9, t_end=e / 1e9) for s, e in spans]
        return Capacity(
            tokens_per_s=tokens / seconds,
            mean_concurrency=inflight_mean(timings, self.t0 / 1e9, self.t1 / 1e9),
            cpu_us_per_token=cpu / tokens * 1e6 if tokens else float("inf"),
            cpu_util=cpu / seconds,
            errors=errors,
        )


async def _capacity_infercost(
    factory: ClientFactory, base_url: str, conc: int, window: _Window
) -> Capacity:
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    body = request_body(target, PROMPT, CAP_TOKENS, stream=True, ignore_eos=True, temperature=None)
    duration = window.warm_s + window.window_s
    plan = LevelPlan(conc, 0, None, True, lambda _s: (body, 128), lambda _r: None, duration)
    done: list[RawRequest] = []
    async with factory(conc) as client:
        await open_connections(client, target, conc)
        window.start()
        await run_closed_loop(client, target, plan, done)
    window.join()
    return _recorded(window, done)


def _recorded(window: _Window, done: list[RawRequest]) -> Capacity:
    """Tokens whose recorded arrival fell in the window, and the requests' spans."""
    arrivals: list[tuple[int, int]] = []
    for r in done:
        lo = bisect.bisect_left(r.chunk_ns, window.t0)
        hi = bisect.bisect_right(r.chunk_ns, window.t1)
        arrivals.append((window.t0, hi - lo))
    spans = [(r.t_send, r.t_end or window.t1) for r in done]
    result = window.result(arrivals, spans, sum(r.error_class is not None for r in done))
    result.error = next((f"{r.error_class}: {r.error}" for r in done if r.error), None)
    return result


async def _capacity_aiohttp(base_url: str, conc: int, window: _Window) -> Capacity:
    """The same closed loop and the same stream reader (each read stamped as it comes out of
    aiohttp's stream reader) on aiohttp's client instead of the slot transport: the HTTP
    stack measured, not assumed. aiohttp is a bench-only extra (`pip install -e
    '.[bench]'`)."""
    import aiohttp  # optional: only this row needs it

    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    body = request_body(target, PROMPT, CAP_TOKENS, stream=True, ignore_eos=True, temperature=None)
    done: list[RawRequest] = []
    connector = aiohttp.TCPConnector(limit=conc, limit_per_host=conc)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def warm() -> None:
            async with session.get(base_url + "/models") as response:
                await response.read()

        # Open the connections off the clock, as open_connections does for the slots.
        await asyncio.gather(*(warm() for _ in range(conc)))

        async def user() -> None:
            while perf_counter_ns() < deadline:
                rec = RawRequest(0, False, perf_counter_ns(), 128)
                rec.t_send = perf_counter_ns()
                async with session.post(target.url, data=body, headers=target.headers) as resp:
                    rec.status = resp.status
                    reader = StreamReader(rec)
                    async for chunk in resp.content.iter_any():
                        reader.feed(chunk, perf_counter_ns())
                if rec.t_end is None:
                    rec.t_end = perf_counter_ns()
                done.append(rec)

        window.start()
        deadline = perf_counter_ns() + round((window.warm_s + window.window_s) * 1e9)
        await asyncio.gather(*(user() for _ in range(conc)))
    window.join()
    return _recorded(window, done)


async def _capacity_raw(base_url: str, conc: int, window: _Window) -> Capacity:
    """A closed loop of raw keep-alive connections, counting content events per read."""
    host, port = _host_port(base_url)
    request = _raw_request(CAP_TOKENS)
    arrivals: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    streams = await asyncio.gather(*(asyncio.open_connection(host, port) for _ in range(conc)))

    async def user(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while perf_counter_ns() < deadline:
                t_send = perf_counter_ns()
                writer.write(request)
                tail = b""
                while True:
                    data = await reader.read(262144)
                    if not data:
                        return
                    now = perf_counter_ns()
                    arrivals.append((now, data.count(b'"content":"') - data.count(b'"content":""')))
                    tail = (tail + data[-5:])[-5:]
                    if tail == b"0\r\n\r\n":
                        break
                spans.append((t_send, now))
        finally:
            writer.close()

    window.start()
    deadline = perf_counter_ns() + round((window.warm_s + window.window_s) * 1e9)
    await asyncio.gather(*(user(r, w) for r, w in streams))
    window.join()
    return window.result(arrivals, spans, 0)


# --- accuracy ---------------------------------------------------------------------------------


@dataclass
class Accuracy:
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float
    queue_p99: float
    mean_concurrency: float
    client_bound: bool
    cpu_us_per_token: float
    sim: dict[str, Any]
    errors: int
    exposure: float | None = None
    stall_max: float | None = None


async def _accuracy_infercost(
    factory: ClientFactory, base_url: str, conc: int, warmup: int, measured: int
) -> tuple[list[RequestTiming], int, float, dict[str, Any]]:
    target = Target.for_endpoint(base_url, "openai-chat", "sim-model", None, 120.0)
    body = request_body(target, PROMPT, ACC_TOKENS, stream=True, ignore_eos=True, temperature=None)
    # Users start spread over one request's duration: a steady state, not a lockstep herd.
    ramp_s = (TTFT_MS + (ACC_TOKENS - 1) * ITL_MS) / 1000.0
    plan = LevelPlan(
        conc, warmup, measured, True, lambda _s: (body, 128), lambda _r: None, ramp_s=ramp_s
    )
    done: list[RawRequest] = []
    health = ClientHealth()  # the reading side's figures, pauses included, as a job has them
    async with factory(conc) as client:
        await open_connections(client, target, conc)
        gc.collect()
        gc.freeze()  # as the worker does before a level's clock starts
        health.start()
        origin, cpu0 = perf_counter_ns(), _cpu_s()
        await run_closed_loop(client, target, plan, done)
        cpu = _cpu_s() - cpu0
        reading = await health.stop(r.chunk_ns for r in done)
        gc.unfreeze()
    timings = [r.timing(origin) for r in done]
    return timings, sum(len(r.chunk_ns) for r in done), cpu, reading


def _sim_stats(sim: SimProcess, *, reset: bool) -> dict[str, Any]:
    with httpx.Client(base_url=sim.base_url, timeout=10.0) as http:
        if reset:
            http.post("/stats/reset").raise_for_status()
            return {}
        stats: dict[str, Any] = http.get("/stats").json()["lateness"]
        return stats


def _accuracy(
    factory: ClientFactory, sim: SimProcess, conc: int, measured: int, *, scrape_s: float = 0.0
) -> Accuracy:
    """One accuracy level; with `scrape_s`, the worker's telemetry scraper reads the
    simulator's /metrics every scrape_s seconds meanwhile, as it does during a job."""
    warmup = conc
    _sim_stats(sim, reset=True)
    scraper = Scraper([sim.base_url + "/metrics"], interval_s=scrape_s) if scrape_s else None
    if scraper is not None:
        scraper.start()
    try:
        timings, tokens, cpu, reading = _run(
            _accuracy_infercost(factory, sim.openai_base_url, conc, warmup, measured)
        )
    finally:
        if scraper is not None:
            scraper.stop()
    lateness = _sim_stats(sim, reset=False)
    f = summarize(timings, target_concurrency=conc, reading=reading)

    def stat(name: str, key: str, truth: float) -> float:
        value = f.stat(name, key)
        return float("nan") if value is None else value - truth

    return Accuracy(
        ttft_p50=stat("ttft_ms", "p50", TTFT_MS),
        ttft_p99=stat("ttft_ms", "p99", TTFT_MS),
        itl_p50=stat("itl_ms", "p50", ITL_MS),
        itl_p99=stat("itl_ms", "p99", ITL_MS),
        queue_p99=f.stat("queue_delay_ms", "p99") or 0.0,
        mean_concurrency=float(f.client.get("inflight_mean") or 0.0),
        client_bound=f.client_bound,
        cpu_us_per_token=cpu / tokens * 1e6 if tokens else float("inf"),
        sim=lateness,
        errors=f.requests_failed,
        exposure=f.client.get("pause_exposure"),
        stall_max=f.client.get("loop_stall_max_ms"),
    )


# --- parsing ----------------------------------------------------------------------------------


def _scan(payload: bytes) -> int:
    """A byte scan in Python of a compact chat event, the approach measured and not taken:
    whether it carries content (2) and a finish_reason (4), or needs a full decode (8)."""
    for mark in (b'": ', b'"error"', b'"timings"', b'"tool_calls"'):
        if mark in payload:
            return 8
    at = payload.find(b'"usage":')
    if at >= 0 and payload[at + 8 : at + 9] != b"n":
        return 8
    kind = 0
    at = payload.find(b'"content":')
    if at >= 0 and payload[at + 10 : at + 11] == b'"' and payload[at + 11 : at + 12] != b'"':
        kind = 2
    at = payload.find(b'"finish_reason":')
    if at >= 0 and payload[at + 16 : at + 17] == b'"':
        kind |= 4
    return kind


def _parse_costs() -> dict[tuple[str, int], float]:
    """CPU microseconds per event for reads of 1 and 16 of the simulator's chat events."""
    prefix = wire.event_prefix("chat.completion.chunk", "chatcmpl-" + "0" * 32, 0, b'"sim-model"')
    costs: dict[tuple[str, int], float] = {}
    for per_read in (1, 16):
        chunk = b"".join(
            prefix + wire.CHAT_TOKEN_CHOICES[k % 16] + wire.EVENT_SUFFIX for k in range(per_read)
        )
        reads = 40_000 // per_read
        for name in ("full", "brief"):
            rec = RawRequest(0, False, 0, 0)
            reader = StreamReader(rec, decode_all=name == "full")
            t0 = time.process_time()
            for _ in range(reads):
                reader.feed(chunk, 0)
            costs[(name, per_read)] = (time.process_time() - t0) / (reads * per_read) * 1e6
            assert len(rec.chunk_ns) == reads * per_read
        payloads = [e[6:] for e in chunk.split(b"\n\n") if e]
        t0 = time.process_time()
        for _ in range(reads):
            for p in payloads:
                _scan(p)
        costs[("scan", per_read)] = (time.process_time() - t0) / (reads * per_read) * 1e6
    return costs


# --- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows (smoke test)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="infercost transports")
    parser.add_argument("--capacity-levels", default="256,1024")
    parser.add_argument("--accuracy-levels", default="1,64,256")
    parser.add_argument("--skip", default="", help="sections to skip: parse,capacity,accuracy")
    parser.add_argument(
        "--scrape-s",
        type=float,
        default=0.25,
        help="also measure accuracy while telemetry is scraped this often (0: don't)",
    )
    parser.add_argument(
        "--aiohttp",
        action="store_true",
        help="add an aiohttp row to the capacity section (bench-only extra: .[bench])",
    )
    args = parser.parse_args()
    clients = {name: CLIENTS[name] for name in args.clients.split(",")}
    skip = set(args.skip.split(","))
    warm_s, window_s = (1.0, 2.0) if args.quick else (2.0, 5.0)
    rounds = 2 if args.quick else 5
    cap_levels = [int(x) for x in args.capacity_levels.split(",")]
    acc_levels = [int(x) for x in args.accuracy_levels.split(",")]
    print(f"# bench/loadgen.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC{' (--quick)' * args.quick}")

    if "parse" not in skip:
        costs = _parse_costs()
        print(
            "\n## SSE parsing: CPU per event, the simulator's chat events: the reader with a "
            "full decode of every event, with the brief decode it uses, and a byte scan in "
            "Python alone (no parsing of the stream around it)"
        )
        for per_read in (1, 16):
            full, brief = costs[("full", per_read)], costs[("brief", per_read)]
            print(
                f"{per_read:>2} events per read: full {full:5.2f} us, brief {brief:5.2f} us "
                f"({brief / full - 1:+.0%}), byte scan alone {costs[('scan', per_read)]:5.2f} us"
            )

    capacity: dict[tuple[str, int], Capacity] = {}
    if "capacity" not in skip:
        print(
            f"\n## capacity and client cost: sim fixed ttft=0 itl=0 burst={CAP_BURST}, "
            f"{CAP_TOKENS} tokens per request, closed loop, {warm_s:g} s warm-up then a "
            f"{window_s:g} s window"
        )
        print(
            f"{'client':10} {'conc':>5} {'tokens/s':>10} {'of raw':>7} {'mean conc':>10} "
            f"{'held':>6} {'cpu/token':>10} {'cpu util':>9} {'errors':>7}"
        )
        config = SimConfig(port=0, ttft_ms=0.0, itl_ms=0.0, model="sim-model", burst=CAP_BURST)
        sim = start_sim_process(config)
        try:
            for conc in cap_levels:
                for name in ("raw", *clients, *(["aiohttp"] if args.aiohttp else [])):
                    window = _Window(warm_s, window_s)
                    url = sim.openai_base_url
                    r = capacity[(name, conc)] = _run(
                        _capacity_raw(url, conc, window)
                        if name == "raw"
                        else _capacity_aiohttp(url, conc, window)
                        if name == "aiohttp"
                        else _capacity_infercost(clients[name], url, conc, window)
                    )
                    raw = capacity[("raw", conc)].tokens_per_s
                    print(
                        f"{name:10} {conc:>5} {r.tokens_per_s:>10,.0f} "
                        f"{r.tokens_per_s / raw:>7.0%} {r.mean_concurrency:>10.1f} "
                        f"{r.mean_concurrency / conc:>6.0%} {r.cpu_us_per_token:>7.2f} us "
                        f"{r.cpu_util:>9.2f} {r.errors:>7}"
                        + (f"  e.g. {r.error}" if r.error else "")
                    )
                    time.sleep(0.5)
        finally:
            sim.stop()

    accuracy: dict[tuple[str, int], Accuracy] = {}
    if "accuracy" not in skip:
        print(
            f"\n## accuracy and simulator fidelity: sim fixed ttft={TTFT_MS:g} ms "
            f"itl={ITL_MS:g} ms, {ACC_TOKENS} tokens per request, closed loop, warm-up = one "
            f"request per user, then max(20, {rounds} x conc) measured; errors are measured "
            "minus injected; sim late = the simulator's own lateness over the same requests"
        )
        print(
            f"{'client':13} {'conc':>5} {'ttft p50':>9} {'ttft p99':>9} {'itl p50':>9} "
            f"{'itl p99':>9} {'queue p99':>10} {'mean conc':>10} {'bound':>6} "
            f"{'cpu/token':>10} {'sim p50':>8} {'sim p99':>8} {'sim max':>8} {'exposed':>8} "
            f"{'stall max':>10}"
        )
        config = SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model")
        sim = start_sim_process(config)
        try:
            runs = [(name, factory, 0.0) for name, factory in clients.items()]
            if args.scrape_s:
                first = next(iter(clients))
                runs.append((f"{first}+scrape", clients[first], args.scrape_s))
            for conc in acc_levels:
                for name, factory, scrape_s in runs:
                    a = accuracy[(name, conc)] = _accuracy(
                        factory, sim, conc, max(20, rounds * conc), scrape_s=scrape_s
                    )
                    print(
                        f"{name:13} {conc:>5} {a.ttft_p50:>+9.2f} {a.ttft_p99:>+9.2f} "
                        f"{a.itl_p50:>+9.3f} {a.itl_p99:>+9.3f} {a.queue_p99:>7.2f} ms "
                        f"{a.mean_concurrency:>10.1f} {a.client_bound!s:>6} "
                        f"{a.cpu_us_per_token:>7.1f} us {a.sim['p50_ms']:>8.3f} "
                        f"{a.sim['p99_ms']:>8.3f} {a.sim['max_ms']:>8.3f} "
                        f"{a.exposure if a.exposure is not None else float('nan'):>8.2%} "
                        f"{a.stall_max or 0.0:>7.1f} ms"
                        + (f"  errors {a.errors}" if a.errors else "")
                    )
                    time.sleep(0.5)
        finally:
            sim.stop()

    _verdicts(clients, capacity, accuracy, cap_levels, acc_levels)


def _verdicts(
    clients: dict[str, ClientFactory],
    capacity: dict[tuple[str, int], Capacity],
    accuracy: dict[tuple[str, int], Accuracy],
    cap_levels: list[int],
    acc_levels: list[int],
) -> None:
    name = next(iter(clients))
    print(f"\n## targets ({name})")

    def line(what: str, value: str, ok: bool) -> None:
        print(f"{'met ' if ok else 'MISS'}  {what:58} {value}")

    for conc in cap_levels:
        r, raw = capacity.get((name, conc)), capacity.get(("raw", conc))
        if r is None or raw is None:
            continue
        share = r.tokens_per_s / raw.tokens_per_s
        share_target = CAP_SHARE_TARGET.get(conc, 0.70)
        line(
            f"capacity at {conc}: >= {share_target:.0%} of raw",
            f"{share:.0%}",
            share >= share_target,
        )
        held = r.mean_concurrency / conc
        line(
            f"capacity at {conc}: concurrency held >= {CONC_HELD_TARGET:.0%}",
            f"{held:.1%}",
            held >= CONC_HELD_TARGET,
        )
        cpu_target = CPU_US_TARGET.get(conc, 15.0)
        line(
            f"client cost at {conc}: <= {cpu_target:g} us/token",
            f"{r.cpu_us_per_token:.2f} us",
            r.cpu_us_per_token <= cpu_target,
        )
    top = max(acc_levels)
    a = accuracy.get((name, top))
    if a is not None:
        p50 = max(abs(a.ttft_p50), abs(a.itl_p50))
        p99 = max(abs(a.ttft_p99), abs(a.itl_p99))
        line(
            f"accuracy at {top}: |p50 error| < {P50_ERR_TARGET_MS:g} ms (TTFT, ITL)",
            f"{p50:.2f} ms",
            p50 < P50_ERR_TARGET_MS,
        )
        line(
            f"accuracy at {top}: |p99 error| < {P99_ERR_TARGET_MS:g} ms (TTFT, ITL)",
            f"{p99:.2f} ms",
            p99 < P99_ERR_TARGET_MS,
        )
        line(f"accuracy at {top}: client_bound false", str(a.client_bound), not a.client_bound)
        sim99 = float(a.sim["p99_ms"])
        line(
            f"simulator at {top}: lateness p99 < {SIM_P99_TARGET_MS:g} ms",
            f"{sim99:.3f} ms",
            sim99 < SIM_P99_TARGET_MS,
        )


if __name__ == "__main__":
    main()
