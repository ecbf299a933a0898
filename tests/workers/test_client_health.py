"""Stamps taken where the bytes arrive, and the client's reading-side health.

Real loopback sockets: a raw server in the test's event loop writes a stream in pieces and
records (perf_counter_ns, the one clock of the process) when it wrote each; the client's
stamps are checked against those records and against each other, never against a speed.
"""

from __future__ import annotations

import asyncio
import gc
import time
from time import perf_counter_ns

import httpx
import msgspec
import pytest

from infercost.figures.metrics import (
    SPOILED_BY_READING,
    SPOILED_BY_SENDING,
    RequestTiming,
    summarize,
)
from sim.config import SimConfig
from sim.process import sim_process
from tests.workers.test_stream import fixture_bytes
from tests.workers.test_transport_servers import (
    EVENTS,
    SSE_HEAD,
    fetch,
    raw_server,
)
from workers.loadgen import stream
from workers.loadgen.health import BUCKET_NS, ClientHealth, LagHistogram, ReadCost, merged
from workers.loadgen.stream import RawRequest, Target, request_body
from workers.loadgen.transport import READS, SLOT, load_client


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_each_event_keeps_the_stamp_of_the_read_that_completed_it() -> None:
    """The server writes the stream in four pieces, the third ending an event that the
    second began, while the client does not parse; only then does the parser run, over every
    read at once. Each event must carry the stamp of the read that completed it: no earlier
    than the server wrote that piece, and earlier than the parser ran (stamps taken when the
    parser got to them would all be the parser's time)."""
    role, first, second, third, *rest = EVENTS  # the role event carries no content
    pieces = [
        SSE_HEAD + chunk(role) + chunk(first),
        chunk(second[:20]),
        chunk(second[20:] + third),
        b"".join(chunk(e) for e in rest) + b"0\r\n\r\n",
    ]
    written: list[int] = []
    go_on = asyncio.Event()

    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        for piece in pieces:
            written.append(perf_counter_ns())
            writer.write(piece)
            await writer.drain()
            # Server and client share this loop: the client reads this piece in the next
            # iteration, before this timer can fire, so every piece is a read of its own.
            await asyncio.sleep(0.005)
        go_on.set()
        return True

    health = ClientHealth()
    async with raw_server(answer) as (url, _seen), load_client(4, health=health) as client:
        target = Target.for_endpoint(url, "openai-chat", "m", None, 5.0)
        body = request_body(target, "hi", 8, stream=True, ignore_eos=True, temperature=None)
        request = client.build_request(
            "POST", target.url, content=body, headers=target.headers, extensions={SLOT: 0}
        )
        response = await client.send(request, stream=True)
        assert READS in response.extensions
        await go_on.wait()
        await asyncio.sleep(0.02)  # the last piece read, still unparsed
        parsing = perf_counter_ns()
        rec = RawRequest(0, False, parsing, 8)
        await stream.read_stream(response, rec)
        await response.aclose()

    assert rec.finished and len(rec.chunk_ns) == 8
    # Content event 1 came with piece 0, event 2 was completed by piece 2 (which also
    # brought event 3), events 4-8 came with piece 3.
    completed_by = [0, 2, 2, 3, 3, 3, 3, 3]
    for k, piece in enumerate(completed_by):
        assert written[piece] <= rec.chunk_ns[k] < parsing, (k, piece)
    # Piece 2 was written after piece 1 was read: event 2 is stamped after the read that
    # brought only its first half.
    assert rec.chunk_ns[1] == rec.chunk_ns[2] > written[2] > rec.chunk_ns[0]
    assert rec.t_first_byte == rec.chunk_ns[0]  # the head, role and first event: one read
    assert list(rec.chunk_ns[3:]) == [rec.chunk_ns[3]] * 5
    assert rec.t_end == rec.chunk_ns[-1]  # [DONE] came in the last read
    # The parser took the first read's bytes at least (parsing - its stamp) after they came.
    assert health.read_lag.count >= 1
    assert health.read_lag.max_ns >= parsing - rec.chunk_ns[0]


async def test_a_whole_body_is_stamped_at_the_reads_that_brought_it() -> None:
    """A non-streamed answer written in two pieces and parsed only later: its first byte is
    the first read's stamp and its end the last read's, not the parse time."""
    body = fixture_bytes("chat-nostream.json")
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    pieces = [head % len(body) + body[:40], body[40:]]
    written: list[int] = []
    go_on = asyncio.Event()

    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        for piece in pieces:
            written.append(perf_counter_ns())
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.005)  # a read of its own (same loop as the client)
        go_on.set()
        return True

    async with raw_server(answer) as (url, _seen), load_client(4) as client:
        target = Target.for_endpoint(url, "openai-chat", "m", None, 5.0)
        payload = request_body(target, "hi", 8, stream=False, ignore_eos=True, temperature=None)
        request = client.build_request(
            "POST", target.url, content=payload, headers=target.headers, extensions={SLOT: 0}
        )
        response = await client.send(request, stream=True)
        await go_on.wait()
        await asyncio.sleep(0.02)
        parsing = perf_counter_ns()
        rec = RawRequest(0, False, parsing, 8)
        await stream._read_whole(response, rec)
        await response.aclose()

    assert rec.t_first_byte is not None and rec.t_end is not None
    assert written[0] <= rec.t_first_byte < written[1] <= rec.t_end < parsing
    assert list(rec.chunk_ns) == [rec.t_end] and rec.n_out > 0


async def test_a_blocked_loop_shows_as_loop_lag() -> None:
    """The loop is blocked until a probe of the sampler waits to run (posted, not yet run),
    then 20 ms more: that probe cannot run before the block ends, so it waited >= 20 ms."""
    health = ClientHealth()
    health.start()
    await asyncio.sleep(0.05)
    while health.posted <= health.loop_lag.count:
        time.sleep(0.001)  # noqa: ASYNC251 - blocks the loop on purpose; the sampler runs
    time.sleep(0.02)  # noqa: ASYNC251
    await asyncio.sleep(0.02)
    figures = await health.stop()
    assert figures["loop_lag_max_ms"] >= 20.0, figures


async def test_a_short_level_still_gets_its_cpu_share() -> None:
    """A level shorter than the one-second CPU window: the peak is its whole length's share,
    which is above zero after this process spent 50 ms of CPU in it."""
    health = ClientHealth()
    health.start()
    spent = time.process_time() + 0.05
    while time.process_time() < spent:
        pass  # CPU work on the loop's thread
    await asyncio.sleep(0.12)  # at least a tenth of the window
    figures = await health.stop()
    assert figures["cpu_util_peak"] is not None and figures["cpu_util_peak"] > 0, figures


def test_lag_quantiles_are_the_upper_edge_of_their_bucket() -> None:
    lags = LagHistogram()
    for k in range(100):  # 0.5, 1.5, ... 99.5 buckets of 10 us
        lags.record(k * BUCKET_NS + BUCKET_NS // 2)
    # The median (rank 50) lies in bucket 49: upper edge 500 us; the p99 (rank 99) in bucket
    # 98: 990 us; max 99.5 buckets = 995 us.
    assert lags.quantile_ms(0.5) == 0.5
    assert lags.quantile_ms(0.99) == 0.99
    assert lags.max_ns == 995_000
    lags.record(-5)  # clock granularity: counts as no lag
    assert lags.counts[0] == 2
    lags.record(3_000_000_000)  # beyond the last bucket: the quantile reports the maximum
    assert lags.quantile_ms(1.0) == 3000.0
    assert LagHistogram().quantile_ms(0.5) is None
    # The smallest quantile is the first bucket holding a lag, not an empty one before it.
    sparse = LagHistogram()
    sparse.record(7 * BUCKET_NS + 1)
    assert sparse.quantile_ms(0.0) == sparse.quantile_ms(0.5) == 0.07


def test_a_new_level_zeroes_the_histograms_bodies_still_hold() -> None:
    # A body read across a level's end keeps the histogram it was given: what it records
    # after the reset counts in the new level, and nothing of the old level's stays.
    health = ClientHealth()
    held = health.read_lag
    held.record(5_000_000)  # 5 ms, the old level
    health.reset()
    assert health.figures()["read_lag_max_ms"] is None
    held.record(2 * BUCKET_NS)  # 20 us, recorded through the body's reference
    figures = health.figures()
    assert (figures["read_lag_p50_ms"], figures["read_lag_max_ms"]) == (0.02, 0.02)


async def test_requests_sent_again_are_counted() -> None:
    """The server answers the first request of each connection and drops every later one
    without a byte: each slot's second and third request is sent again on a fresh
    connection, and the count of re-sends is what the server dropped."""

    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        if nth > 0:
            writer.close()
            return False
        writer.write(SSE_HEAD + b"".join(chunk(e) for e in EVENTS) + b"0\r\n\r\n")
        await writer.drain()
        return True

    health = ClientHealth()
    async with raw_server(answer) as (url, seen), load_client(4, health=health) as client:
        for _ in range(3):
            for slot in range(2):
                rec = await fetch(client, url, slot)
                assert rec.error_class is None, rec.error
    # Per slot: answered, dropped and re-sent, answered, dropped and re-sent, answered.
    assert (seen.answered(), seen.dropped()) == (6, 4)
    assert health.resent == 4
    assert health.figures()["resent"] == health.resent


def _timing(seq: int, t_sched: float, t_send: float) -> RequestTiming:
    """A successful request of 4 tokens 10 ms apart, 50 ms after its send."""
    chunks = [t_send + 0.05 + 0.01 * k for k in range(4)]
    return RequestTiming(
        seq,
        False,
        t_sched,
        t_send,
        t_first_byte=chunks[0],
        t_end=chunks[-1],
        chunk_times=chunks,
        n_in=8,
        n_out=4,
        status=200,
    )


@pytest.mark.parametrize(
    ("reading", "bound", "spoils"),
    [
        ({"read_lag_p99_ms": 0.05, "loop_lag_p99_ms": 0.04}, False, []),
        ({"read_lag_p99_ms": 12.0, "loop_lag_p99_ms": 0.04}, True, list(SPOILED_BY_READING)),
        ({"read_lag_p99_ms": 0.05, "loop_lag_p99_ms": 10.5}, True, list(SPOILED_BY_READING)),
        ({"read_lag_p99_ms": 10.0, "loop_lag_p99_ms": None}, False, []),
    ],
)
def test_reading_late_makes_a_run_client_bound(
    reading: dict[str, float | None], bound: bool, spoils: list[str]
) -> None:
    # Sent on time (queue delay 0), one request after another: only reading can be late.
    timings = [_timing(k, k * 0.1, k * 0.1) for k in range(10)]
    figures = summarize(timings, reading={**reading, "resent": 2})
    assert figures.client_bound is bound
    assert figures.client["spoils"] == spoils
    assert figures.client["read_lag_p99_ms"] == reading["read_lag_p99_ms"]
    assert figures.client["resent"] == 2
    codes = [r["code"] for r in (figures.adequacy or {})["reasons"]]
    assert ("client_bound" in codes) is bound


def test_sending_late_spoils_the_throughput_figures() -> None:
    # Every request went out 20 ms after it was due: queue delay p99 20 ms > 10 ms.
    timings = [_timing(k, k * 0.1, k * 0.1 + 0.02) for k in range(10)]
    figures = summarize(timings, reading={"read_lag_p99_ms": 0.1, "loop_lag_p99_ms": 0.1})
    assert figures.client_bound is True
    assert figures.client["spoils"] == list(SPOILED_BY_SENDING)
    # Without reading figures (a sharded level) the send side alone decides.
    assert summarize(timings).client["spoils"] == list(SPOILED_BY_SENDING)


async def test_stamps_follow_the_simulators_own_record_of_its_writes() -> None:
    """The simulator (another process) records when it wrote each content event on
    CLOCK_MONOTONIC, the clock of this process's perf_counter: no stamp may precede the
    write it stamps (bytes cannot be read before they are written), and each request was
    sent before the simulator saw it arrive."""
    config = SimConfig(port=0, ttft_ms=20.0, itl_ms=5.0, model="m", record_writes=True)
    with sim_process(config) as sim:
        target = Target.for_endpoint(sim.openai_base_url, "openai-chat", "m", None, 10.0)
        recs = []
        async with load_client(4) as client:
            for seq in range(3):
                body = msgspec.json.encode(
                    {
                        "model": "m",
                        "messages": [{"role": "user", "content": "a b c"}],
                        "max_tokens": 12,
                        "stream": True,
                        "user": f"r{seq}",
                    }
                )
                rec = RawRequest(seq, False, perf_counter_ns(), 3)
                await stream.send(client, target, body, rec, stream=True, slot=0)
                assert rec.error_class is None, rec.error
                recs.append(rec)
        async with httpx.AsyncClient(base_url=sim.base_url) as http:
            writes = (await http.get("/stats")).json()["writes"]
    for rec in recs:
        arrival, *server = writes[f"r{rec.seq}"]
        client_s = [t * 1e-9 for t in rec.chunk_ns]
        assert len(client_s) == len(server) == 12
        assert rec.t_send * 1e-9 <= arrival  # the request was sent before it arrived
        assert all(c >= s for c, s in zip(client_s, server, strict=True))
        assert client_s == sorted(client_s)


async def test_a_blocked_loop_is_seen_by_its_own_ticks_and_flags_the_level() -> None:
    """Events due every millisecond for 200 ms (callbacks on the loop, each stamping as a
    socket read's callback does), and the loop blocked for 60 ms among them: the loop's own
    tick, due during the block, runs at least 55 ms late (the block less one tick), that time
    counts as paused, and the events due in the block are stamped after it: more than 5 ms late
    for all but the first 5 ms of them, far more than 1% of the level's events, so the level
    is client-bound for its pauses."""
    health = ClientHealth()
    health.start()
    loop = asyncio.get_running_loop()
    stamps: list[int] = []
    first = loop.time() + 0.01
    for k in range(200):
        loop.call_at(first + k * 0.001, lambda: stamps.append(perf_counter_ns()))
    await asyncio.sleep(0.07)
    started = perf_counter_ns()
    time.sleep(0.06)  # noqa: ASYNC251 - blocks the loop on purpose
    ended = perf_counter_ns()
    blocked_ms = (ended - started) / 1e6
    await asyncio.sleep(0.2)
    assert len(stamps) == 200
    figures = await health.stop([stamps])
    tick_ms = 2.0
    assert figures["loop_stall_max_ms"] >= blocked_ms - tick_ms, figures
    assert figures["paused_ms"] >= blocked_ms - tick_ms, figures
    # Independent count: events stamped after the block though due in it, beyond the bound.
    late = [t for t in stamps if ended <= t and t - (ended - round(blocked_ms * 1e6)) > 5e6]
    assert len(late) >= 0.9 * (blocked_ms - 5 - tick_ms)
    assert figures["pause_exposure"] >= 0.9 * (blocked_ms - 5 - tick_ms) / 200
    assert figures["pause_bound_ms"] == 5.0
    # Requests sent and read on time by every other measure: only the pause flags the level.
    timings = [_timing(k, k * 0.1, k * 0.1) for k in range(10)]
    level = summarize(timings, reading=figures)
    assert level.client_bound is True
    assert level.client["spoils"] == list(SPOILED_BY_READING)
    reasons = {r["code"]: r["detail"] for r in (level.adequacy or {})["reasons"]}
    assert "client_paused" in reasons
    assert f"longest loop stall {figures['loop_stall_max_ms']} ms" in reasons["client_paused"]
    # The same level without the pause is not flagged (time.sleep let the probe thread run,
    # so its loop lag saw this block too: a garbage collection would have held it).
    calm = {**figures, "pause_exposure": 0.0, "loop_lag_p99_ms": 0.1}
    assert summarize(timings, reading=calm).client_bound is False
    # A worker that records a looser limit (INFERCOST_PAUSE_EXPOSURE_LIMIT) than this level's
    # exposure judges it by that limit, and the reason quotes the limit it was judged by.
    exposed = figures["pause_exposure"]
    loose = {**figures, "loop_lag_p99_ms": 0.1, "pause_exposure_limit": exposed + 0.01}
    assert summarize(timings, reading=loose).client_bound is False
    tight = {**loose, "pause_exposure_limit": exposed / 2}
    judged = summarize(timings, reading=tight)
    assert judged.client_bound is True
    (detail,) = [r["detail"] for r in judged.adequacy["reasons"] if r["code"] == "client_paused"]
    assert f"(limit {exposed / 2:.0%})" in detail
    # A pause no event was due in spoils nothing: the same figures over events after it.
    assert health.pauses.exposure([[ended + 10_000_000 + k for k in range(100)]]) == 0.0


async def test_every_collection_is_timed_by_generation() -> None:
    """A full collection over a big heap, forced on the loop mid-level: the collector's own
    callbacks time it (as long as the call around it took, less the call itself), it counts
    in generation 2, and the loop's ticks see the loop held for it."""
    heap = [[k] for k in range(600_000)]  # many small containers for the collector to walk
    health = ClientHealth()
    health.start()
    await asyncio.sleep(0.02)
    before = health.pauses.gc_count[2]
    started = perf_counter_ns()
    gc.collect()
    took_ms = (perf_counter_ns() - started) / 1e6
    await asyncio.sleep(0.02)
    figures = await health.stop()
    del heap
    collected = figures["gc"]
    assert collected["collections"][2] >= before + 1
    assert 0.9 * took_ms - 0.05 <= collected["max_ms"] <= took_ms + 0.05, (collected, took_ms)
    assert sum(collected["paused_ms"]) >= collected["max_ms"]
    if took_ms > 10.0:
        assert figures["loop_stall_max_ms"] >= took_ms - 2.5, figures


def test_shards_readings_merge_to_the_worst_of_any() -> None:
    one = {
        "loop_lag_p99_ms": 1.0,
        "pause_exposure": 0.002,
        "resent": 1,
        "paused_ms": 3.0,
        "gc": {"collections": [5, 1, 0], "paused_ms": [1.0, 0.5, 0.0], "max_ms": 0.4},
    }
    two = {
        "loop_lag_p99_ms": 4.0,
        "pause_exposure": 0.02,
        "resent": 2,
        "paused_ms": 1.0,
        "gc": {"collections": [3, 0, 1], "paused_ms": [0.5, 0.0, 9.0], "max_ms": 9.0},
    }
    both = merged([one, None, two])
    assert both is not None
    assert (both["loop_lag_p99_ms"], both["pause_exposure"], both["paused_ms"]) == (4.0, 0.02, 3.0)
    assert both["resent"] == 3
    assert both["gc"] == {"collections": [8, 1, 1], "paused_ms": [1.5, 0.5, 9.0], "max_ms": 9.0}
    assert merged([None, {}]) is None


def test_the_read_cost_of_a_level_comes_from_levels_of_requests_about_as_long() -> None:
    """A request's overhead is spread over its events: levels of 16-token requests cost
    50 us an event, of 512-token ones 3 us; a level of 512-token requests is judged by the
    latter (a split of it sized by the former would take 16 times the processes)."""
    cost = ReadCost()
    cost.record(0.1, 2_000, 125)  # 2,000 events of 16-token requests: 50 us an event
    cost.record(0.3, 100_000, 195)  # 512-token requests (about): 3 us an event
    cost.record(0.5, 1_000, 10)  # too few events to say anything
    assert cost.cpu_us_per_event(512) == pytest.approx(3.0)
    assert cost.cpu_us_per_event(16) == pytest.approx(50.0)
    assert cost.cpu_us_per_event(20) == pytest.approx(50.0)  # within a factor of 2
    assert cost.cpu_us_per_event(100) is None  # nothing measured about that long
    # Asked without a length: every kept level, 0.4 s over 102,000 events
    assert cost.cpu_us_per_event() == pytest.approx(0.4 / 102_000 * 1e6)
