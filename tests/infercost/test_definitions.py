"""vLLM-, GuideLLM- and AIPerf-style TPOT, ITL and throughput (infercost/figures/peers.py)
against hand arithmetic on one hand-made run, where each definition must differ from the
others and from infercost's as the tools' formulas predict.

The run (t_sched and t_send in s from the run's start; chunk offsets and e2e in ms from
t_send):

    W   warm-up   t_send 0.00  chunks [5, 6]                n_out 2  e2e   7
    R1            t_send 0.10  chunks [100, 110, 120, 130]  n_out 4  e2e 400  (t_sched 0.09;
                                                                     ends 270 ms after its
                                                                     last token)
    R2            t_send 0.15  chunks [200, 220, 260]       n_out 5  e2e 260  tokens [2, 1, 2]
    R3            t_send 0.20  chunks [80]                  n_out 1  e2e  90  (one token)
    R4            t_send 0.25  chunks [150]                 n_out 3  e2e 150  (3 tokens, one event)
    R5  timeout   t_send 0.30  chunks []                    n_out 0  e2e 700
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Any

import pytest

from infercost.figures.metrics import STAT_KEYS, RequestTiming, distribution, summarize
from infercost.figures.peers import (
    TOOLS,
    Sample,
    Samples,
    Tool,
    recompute,
    weighted_distribution,
)


def sample(
    t_send: float,
    chunks: list[float],
    n_out: int,
    e2e: float | None,
    *,
    t_sched: float | None = None,
    first: int | None = None,
    ok: bool = True,
    warmup: bool = False,
) -> Sample:
    return Sample(
        t_sched=t_send if t_sched is None else t_sched,
        t_send=t_send,
        e2e_ms=e2e,
        n_out=n_out,
        chunk_times_ms=chunks,
        first_chunk_tokens=first,
        succeeded=ok,
        warmup=warmup,
    )


RUN = [
    sample(0.0, [5.0, 6.0], 2, 7.0, warmup=True),
    sample(0.10, [100.0, 110.0, 120.0, 130.0], 4, 400.0, t_sched=0.09),
    sample(0.15, [200.0, 220.0, 260.0], 5, 260.0, first=2),  # chunk tokens [2, 1, 2]
    sample(0.20, [80.0], 1, 90.0),
    sample(0.25, [150.0], 3, 150.0),
    sample(0.30, [], 0, 700.0, ok=False),
]


def as_timing(seq: int, s: Sample) -> RequestTiming:
    """The same request as the worker records it, for infercost's own figures (R2's chunk
    tokens in full: infercost weights each later event's gap by its tokens)."""
    return RequestTiming(
        seq=seq,
        warmup=s.warmup,
        t_sched=s.t_sched,
        t_send=s.t_send,
        t_end=None if s.e2e_ms is None else s.t_send + s.e2e_ms / 1000,
        chunk_times=[s.t_send + c / 1000 for c in s.chunk_times_ms],
        n_out=s.n_out,
        chunk_tokens=None if s.first_chunk_tokens is None else [2, 1, 2],
        error_class=None if s.succeeded else "timeout",
    )


def test_infercost_reference_figures() -> None:
    """infercost's own figures on the run, for the contrast every other test draws.

    TPOT: R1 (130 - 100) / 3 = 10, R2 (260 - 200) / 4 = 15; R3 (1 token) and R4 (one
    event) left out. ITL per token: R1 10, 10, 10; R2 20 (1 token), 40 / 2 = 20 twice.
    Duration: max t_end 1.0 (R5) - min t_send 0.10 = 0.9 s; 13 output tokens.
    """
    figures = summarize([as_timing(i, s) for i, s in enumerate(RUN)])
    assert figures.stats["tpot_ms"]["count"] == 2
    assert figures.stats["tpot_ms"]["mean"] == pytest.approx(12.5)
    assert figures.stats["itl_ms"]["count"] == 6
    assert figures.stats["itl_ms"]["mean"] == pytest.approx(15.0)
    assert figures.duration_s == pytest.approx(0.9)
    assert figures.output_tokens_per_s == pytest.approx(13 / 0.9)


def test_vllm() -> None:
    """TPOT = (last chunk - TTFT) / (n_out - 1) for n_out > 1: R1 10, R2 60 / 4 = 15, and
    R4 (3 tokens in one event) 0 / 2 = 0, which infercost leaves out. ITL pools raw chunk
    gaps: 10, 10, 10, 20, 40 (R2's 2-token gap counts once at 40). Duration from the first
    due time to the last end: 1.0 - 0.09 = 0.91 s."""
    f = recompute("vllm", RUN)
    assert f.tpot_ms["count"] == 3
    assert f.tpot_ms["mean"] == pytest.approx(25 / 3)
    assert (f.tpot_ms["min"], f.tpot_ms["p50"], f.tpot_ms["max"]) == (0.0, 10.0, 15.0)
    # Linear interpolation: p99 of [0, 10, 15] = 10 + 0.98 x 5.
    assert f.tpot_ms["p99"] == pytest.approx(14.9)
    assert f.itl_ms["count"] == 5
    assert f.itl_ms["mean"] == pytest.approx(18.0)
    assert (f.itl_ms["p50"], f.itl_ms["max"]) == (10.0, 40.0)
    assert f.duration_s == pytest.approx(0.91)
    assert f.output_tokens_per_s == pytest.approx(13 / 0.91)
    assert f.requests_per_s == pytest.approx(4 / 0.91)


def test_guidellm() -> None:
    """TPOT = (t_last - t_send) / n_out weighted by n_out: R1 130 / 4 = 32.5 (x4), R2
    260 / 5 = 52 (x5), R3 80 / 1 = 80 (x1), R4 150 / 3 = 50 (x3); mean 620 / 13. Its
    percentiles take the first value whose cumulative weight reaches p: cumulative 4/13,
    7/13, 12/13, 1 over 32.5, 50, 52, 80, so p50 = 50, p90 = 52, p95 = 80.

    ITL = (t_last - t_first) / (n_out - 1) weighted by n_out - 1: R1 10 (x3), R2 15 (x4),
    R4 0 (x2), R3 weight 0; mean 90 / 9 = 10; cumulative 2/9, 5/9, 1 over 0, 10, 15.

    Output tokens/s = 13 / (last token 0.41 (R2) - first token 0.20 (R1)) = 13 / 0.21.
    """
    f = recompute("guidellm", RUN)
    assert f.tpot_ms["count"] == 13
    assert f.tpot_ms["mean"] == pytest.approx(620 / 13)
    assert (f.tpot_ms["min"], f.tpot_ms["max"]) == (32.5, 80.0)
    assert (f.tpot_ms["p50"], f.tpot_ms["p90"], f.tpot_ms["p95"]) == (50.0, 52.0, 80.0)
    assert f.itl_ms["count"] == 9
    assert f.itl_ms["mean"] == pytest.approx(10.0)
    assert (f.itl_ms["min"], f.itl_ms["p50"], f.itl_ms["p90"]) == (0.0, 10.0, 15.0)
    assert f.output_tokens_per_s == pytest.approx(13 / 0.21)
    assert f.requests_per_s == pytest.approx(4 / 0.91)


def test_aiperf() -> None:
    """inter_token_latency = (t_last - t_first) / (n_out - first chunk's tokens): R1 30 / 3
    = 10, R2 60 / (5 - 2) = 20 (infercost: 15), R4 0 / 2 = 0; R3 has < 2 tokens.
    inter_chunk_latency pools raw gaps like vLLM. Duration: last content response of a
    successful request (R2, 0.41) - first send 0.10 = 0.31 s, not R1's or R5's later end."""
    f = recompute("aiperf", RUN)
    assert f.tpot_ms["count"] == 3
    assert f.tpot_ms["mean"] == pytest.approx(10.0)
    assert (f.tpot_ms["min"], f.tpot_ms["p50"], f.tpot_ms["max"]) == (0.0, 10.0, 20.0)
    assert f.itl_ms["count"] == 5
    assert f.itl_ms["mean"] == pytest.approx(18.0)
    assert f.duration_s == pytest.approx(0.31)
    assert f.output_tokens_per_s == pytest.approx(13 / 0.31)
    assert f.requests_per_s == pytest.approx(4 / 0.31)


def test_the_four_tpots_differ_as_predicted() -> None:
    """On one stored run: GuideLLM's includes TTFT (largest), AIPerf's subtracts R2's
    2-token first chunk (R2 at 20 where infercost has 15), vLLM's counts the one-event
    request as 0 (smallest), infercost's leaves it out."""
    means = {tool: float(recompute(tool, RUN).tpot_ms["mean"] or 0.0) for tool in TOOLS}
    assert means == pytest.approx({"vllm": 25 / 3, "guidellm": 620 / 13, "aiperf": 10.0})
    assert means["vllm"] < means["aiperf"] < 12.5 < means["guidellm"]


def test_a_late_end_moves_throughput_windows_not_tpot() -> None:
    """One request whose response ends 1 s after its last token: no TPOT ends at t_end
    (vLLM since PR #55508, GuideLLM and AIPerf all stop at the last token), but vLLM's and
    GuideLLM's request windows do and AIPerf's does not."""
    late = [sample(0.0, [100.0, 110.0, 120.0], 3, 1120.0)]
    vllm, guidellm, aiperf = (recompute(tool, late) for tool in TOOLS)
    assert vllm.tpot_ms["mean"] == pytest.approx(10.0)
    assert guidellm.tpot_ms["mean"] == pytest.approx(40.0)
    assert aiperf.tpot_ms["mean"] == pytest.approx(10.0)
    assert vllm.duration_s == pytest.approx(1.12)
    assert guidellm.requests_per_s == pytest.approx(1 / 1.12)
    assert aiperf.duration_s == pytest.approx(0.12)
    # GuideLLM's token rate spans first to last token only: 3 tokens / 20 ms.
    assert guidellm.output_tokens_per_s == pytest.approx(150.0)


def test_aiperf_falls_back_to_one_first_token_when_chunk_counts_disagree() -> None:
    """A first chunk reported with as many tokens as the whole answer leaves no decode
    tokens; AIPerf then divides by n_out - 1, as without per-chunk usage."""
    odd = [sample(0.0, [100.0, 130.0], 4, 130.0, first=4)]
    assert recompute("aiperf", odd).tpot_ms["mean"] == pytest.approx(10.0)
    unknown = [sample(0.0, [100.0, 130.0], 4, 130.0)]
    assert recompute("aiperf", unknown).tpot_ms["mean"] == pytest.approx(10.0)
    bundled = [sample(0.0, [100.0, 130.0], 4, 130.0, first=3)]
    assert recompute("aiperf", bundled).tpot_ms["mean"] == pytest.approx(30.0)


def test_weighted_percentiles_do_not_interpolate() -> None:
    """GuideLLM's p50 of 1, 2, 3, 4 is 2 (cumulative 0.5 reached at 2), where NumPy's
    linear method gives 2.5; zero-weight values vanish; duplicates merge."""
    stats = weighted_distribution([4.0, 1.0, 3.0, 2.0, 9.0], [1, 1, 1, 1, 0])
    assert stats["p50"] == 2.0
    assert stats["max"] == 4.0
    assert stats["count"] == 4
    merged = weighted_distribution([5.0, 5.0, 1.0], [1, 1, 2])
    assert (merged["p50"], merged["p90"], merged["mean"]) == (1.0, 5.0, 3.0)
    empty = weighted_distribution([1.0], [0])
    assert empty["count"] == 0
    assert empty["mean"] is None


def test_no_successful_request_gives_empty_figures() -> None:
    """Latencies come from successful requests only. vLLM's and GuideLLM's clocks still
    ran (0 per second over 50 ms); AIPerf's window is bounded by successful responses, so
    it has none."""
    failed = [sample(0.0, [], 0, 50.0, ok=False)]
    for tool in TOOLS:
        f = recompute(tool, failed)
        assert f.tpot_ms["count"] == 0
        assert f.tpot_ms["mean"] is None
        assert f.itl_ms["count"] == 0
    assert recompute("vllm", failed).output_tokens_per_s == 0.0
    assert recompute("guidellm", failed).requests_per_s == 0.0
    # No token was timed: GuideLLM's token rate has no span.
    assert recompute("guidellm", failed).output_tokens_per_s is None
    assert recompute("aiperf", failed).duration_s is None
    assert recompute("aiperf", failed).requests_per_s is None


def test_every_tool_says_how_it_differs_and_where_it_was_read() -> None:
    for tool in TOOLS:
        f = recompute(tool, RUN)
        assert f.tool == tool
        assert f.differences
        assert f.sources
        assert set(f.metric_names) == {
            "tpot_ms",
            "itl_ms",
            "output_tokens_per_s",
            "requests_per_s",
            "duration_s",
        }


def test_pooled_gaps_stay_within_each_successful_request() -> None:
    """A failed request's events between two successful ones give no gap, nor do the jumps
    from one request's last event to the next one's first: gaps 10 and 30 only."""
    run = [
        sample(0.0, [0.0, 10.0], 2, 10.0),
        sample(0.1, [100.0, 150.0, 170.0], 3, 170.0, ok=False),
        sample(0.2, [], 0, 5.0),
        sample(0.3, [200.0, 230.0], 2, 230.0),
    ]
    for tool in ("vllm", "aiperf"):
        itl = recompute(tool, run).itl_ms
        assert (itl["count"], itl["min"], itl["max"]) == (2, 10.0, 30.0)


# --- the vectorised recomputation against a per-request reference --------------------


def _span(ends: list[float], starts: list[float]) -> float | None:
    if not ends or not starts or max(ends) <= min(starts):
        return None
    return max(ends) - min(starts)


def _rate(amount: float, span: float | None) -> float | None:
    return None if span is None else amount / span


def _last(s: Sample) -> float | None:
    """The request's last content event, else its end (ms from t_send)."""
    return s.chunk_times_ms[-1] if len(s.chunk_times_ms) else s.e2e_ms


def _gaps(requests: list[Sample]) -> list[float]:
    """Every gap between consecutive content events within each request, pooled."""
    return [b - a for s in requests for a, b in itertools.pairwise(s.chunk_times_ms)]


def reference(tool: Tool, run: list[Sample]) -> dict[str, Any]:
    """The figures of `tool` computed request by request, in plain loops, straight from the
    definitions (DIFFERENCES): what the vectorised columns must reproduce. The statistics
    of the value lists come from distribution / weighted_distribution, tested on their own
    (tests/infercost/test_metrics.py and test_weighted_percentiles_do_not_interpolate)."""
    measured = [s for s in run if not s.warmup]
    ok = [s for s in measured if s.succeeded]
    window = _span(
        [s.t_send + s.e2e_ms / 1000 for s in measured if s.e2e_ms is not None],
        [s.t_sched for s in measured],
    )
    tpot: list[float] = []
    if tool == "vllm":
        for s in ok:
            c = s.chunk_times_ms
            if s.n_out > 1 and len(c):
                tpot.append((c[-1] - c[0]) / (s.n_out - 1))
        return {
            "tpot_ms": distribution(tpot),
            "itl_ms": distribution(_gaps(ok)),
            "output_tokens_per_s": _rate(sum(s.n_out for s in ok), window),
            "requests_per_s": _rate(len(ok), window),
            "duration_s": window,
        }
    if tool == "guidellm":
        tpot_weights: list[int] = []
        itl: list[float] = []
        itl_weights: list[int] = []
        token_ends: list[float] = []
        token_starts: list[float] = []
        tokens = 0
        for s in ok:
            last = _last(s)
            if s.n_out <= 0 or last is None:
                continue
            c = s.chunk_times_ms
            tpot.append(last / s.n_out)
            tpot_weights.append(s.n_out)
            if s.n_out > 1:
                itl.append((c[-1] - c[0]) / (s.n_out - 1) if len(c) else 0.0)
                itl_weights.append(s.n_out - 1)
            token_ends.append(s.t_send + last / 1000)
            token_starts.append(s.t_send + (c[0] if len(c) else last) / 1000)
            tokens += s.n_out
        return {
            "tpot_ms": weighted_distribution(tpot, tpot_weights),
            "itl_ms": weighted_distribution(itl, itl_weights),
            "output_tokens_per_s": _rate(tokens, _span(token_ends, token_starts)),
            "requests_per_s": _rate(len(ok), window),
            "duration_s": window,
        }
    ends: list[float] = []
    sends: list[float] = []
    tokens = 0
    for s in ok:
        last = _last(s)
        if last is None:
            continue
        c = s.chunk_times_ms
        if s.n_out >= 2 and len(c):
            # Less the first chunk's tokens when known and consistent, else less 1.
            first = s.first_chunk_tokens or 0
            known = first > 0 and s.n_out - first >= 1
            tpot.append((c[-1] - c[0]) / (s.n_out - first if known else s.n_out - 1))
        ends.append(s.t_send + last / 1000)
        sends.append(s.t_send)
        tokens += s.n_out
    duration = _span(ends, sends)
    return {
        "tpot_ms": distribution(tpot),
        "itl_ms": distribution(_gaps(ok)),
        "output_tokens_per_s": _rate(tokens, duration),
        "requests_per_s": _rate(len(ends), duration),
        "duration_s": duration,
    }


def random_run(seed: int, requests: int = 400) -> list[Sample]:
    """A run with every case the definitions tell apart: warm-up, failures with and without
    events (and without an end), 0, 1 and many tokens, several tokens in one event, a first
    chunk's tokens unknown, consistent or not, and successes that streamed no event."""
    rng = random.Random(seed)
    run = []
    t = 0.0
    for i in range(requests):
        t += rng.expovariate(50.0)
        t_send = t + rng.uniform(0.0, 0.002)
        ok = rng.random() > 0.1
        events = rng.choice([0, 1, 1, 2, 3, 5, 8]) if ok or rng.random() < 0.5 else 0
        tokens = [rng.choice([1, 1, 1, 2, 3]) for _ in range(events)]
        times = list(itertools.accumulate(rng.uniform(1.0, 40.0) for _ in range(events)))
        times = [rng.uniform(20.0, 200.0) + x for x in times]
        n_out = sum(tokens) if events else (rng.choice([0, 1, 3]) if ok else 0)
        first = rng.choice([None, tokens[0] if tokens else None, n_out, 0])
        e2e = (times[-1] if times else 50.0) + rng.uniform(0.0, 30.0)
        run.append(
            sample(
                t_send,
                times,
                n_out,
                None if not ok and rng.random() < 0.3 else e2e,
                t_sched=t,
                first=first,
                ok=ok,
                warmup=i < 8,
            )
        )
    return run


def _assert_same(got: Any, want: Any, what: str) -> None:
    if want is None or got is None:
        assert got is want, what
    else:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9), what


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("run", ["hand-made", "seed 1", "seed 2", "seed 3"])
def test_columns_give_the_figures_of_the_per_request_reference(tool: Tool, run: str) -> None:
    """recompute, over whole columns at once, gives what the per-request loops give, for
    every statistic of TPOT and ITL and for throughput, on the hand-made run and on
    random ones of a few hundred requests."""
    samples = RUN if run == "hand-made" else random_run(int(run.removeprefix("seed ")))
    want = reference(tool, samples)
    got = recompute(tool, Samples.of(samples))
    for name in ("tpot_ms", "itl_ms"):
        for key in STAT_KEYS:
            _assert_same(getattr(got, name)[key], want[name][key], f"{tool} {name}.{key}")
        assert getattr(got, name)["count"] == want[name]["count"]
    for name in ("output_tokens_per_s", "requests_per_s", "duration_s"):
        _assert_same(getattr(got, name), want[name], f"{tool} {name}")


def test_the_random_runs_reach_every_case() -> None:
    """The reference comparison is only as good as the cases it meets."""
    samples = random_run(1)
    measured = [s for s in samples if not s.warmup]
    assert any(s.warmup for s in samples)
    assert any(not s.succeeded and len(s.chunk_times_ms) for s in measured)
    assert any(not s.succeeded and s.e2e_ms is None for s in measured)
    assert any(s.succeeded and not len(s.chunk_times_ms) and s.n_out > 0 for s in measured)
    assert any(s.succeeded and len(s.chunk_times_ms) == 1 and s.n_out > 1 for s in measured)
    firsts = [(s.first_chunk_tokens, s.n_out) for s in measured if s.succeeded]
    assert any(f is None for f, _ in firsts)
    assert any(f is not None and f > 0 and n - f >= 1 for f, n in firsts)
    assert any(f is not None and f > 0 and n - f < 1 for f, n in firsts)


def test_columns_without_chunk_times_serve_guidellm_only() -> None:
    """Without the chunk times only GuideLLM's definitions can be applied; no request at
    all gives empty figures."""
    columns = Samples.of(RUN)
    bare = dataclasses.replace(columns, chunk_times_ms=None)
    assert recompute("guidellm", bare) == recompute("guidellm", columns)
    with pytest.raises(ValueError, match="chunk"):
        recompute("vllm", bare)
    empty = Samples.of([])
    for tool in TOOLS:
        f = recompute(tool, empty)
        assert (f.tpot_ms["count"], f.itl_ms["count"], f.duration_s) == (0, 0, None)


def test_unknown_tool_is_refused() -> None:
    with pytest.raises(ValueError, match="vllm, guidellm, aiperf"):
        recompute("genai-perf", RUN)  # type: ignore[arg-type]
