"""A run's TPOT, ITL and throughput recomputed under other tools' definitions.

The same name means different formulas in different benchmark tools (docs/figures.md): vLLM's
`vllm bench serve`, GuideLLM and NVIDIA AIPerf each divide a different time span by a
different token count, pool or average differently, and measure throughput over a
different window. A user holding a figure from one of them can only compare it with
infercost's once both come from the same definition, so this module recomputes them
from the stored raw samples (request_samples), each as that tool's own code does.

Pure functions over plain values, like infercost.figures.metrics: no database, no ORM objects. A
run is read as columns (`Samples`, NumPy arrays, one element per request, as the service
reads them) and every definition is computed over whole columns at once, so a run of a
hundred thousand requests costs no Python object per request; `Sample` (one request) is
there for small runs and tests.
The sources each definition follows are listed in `SOURCES` and returned with the figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infercost.figures.metrics import STAT_KEYS, distribution

Tool = Literal["vllm", "guidellm", "aiperf"]
#: The tools whose definitions can be applied, in the order the API lists them.
TOOLS: tuple[Tool, ...] = ("vllm", "guidellm", "aiperf")

Stats = dict[str, float | int | None]

#: Where each definition was read (repository, path, and the revision read).
SOURCES: dict[Tool, tuple[str, ...]] = {
    "vllm": (
        "vllm-project/vllm vllm/benchmarks/serve.py (calculate_metrics, benchmark; "
        "revision 009e6d4a1cd6)",
        "vllm-project/vllm vllm/benchmarks/lib/endpoint_request_func.py "
        "(async_request_openai_chat_completions; revision 02cfb534df56)",
        "vllm-project/vllm pull request #55508 (the trailing usage chunk no longer ends "
        "the request latency)",
    ),
    "guidellm": (
        "vllm-project/guidellm src/guidellm/schemas/request_stats.py "
        "(GenerativeRequestStats; revision 06cef2910dc1)",
        "vllm-project/guidellm src/guidellm/benchmark/schemas/generative/metrics.py "
        "(GenerativeMetrics.compile; revision 06cef2910dc1)",
        "vllm-project/guidellm src/guidellm/schemas/statistics.py "
        "(DistributionSummary; revision 03820eba155d)",
        "vllm-project/guidellm docs/guides/metrics.md",
    ),
    "aiperf": (
        "ai-dynamo/aiperf src/aiperf/metrics/types/inter_token_latency_metric.py "
        "(revision 58dd5dea729c)",
        "ai-dynamo/aiperf src/aiperf/metrics/types/inter_chunk_latency_metric.py "
        "(revision 58028d5ba1cb)",
        "ai-dynamo/aiperf src/aiperf/metrics/types/request_latency_metric.py, "
        "min_request_metric.py, max_response_metric.py",
        "ai-dynamo/aiperf docs/metrics_reference.md",
    ),
}

#: What each tool calls the figure this module returns under infercost's name.
METRIC_NAMES: dict[Tool, dict[str, str]] = {
    "vllm": {
        "tpot_ms": "TPOT (Time per Output Token, excl. 1st token)",
        "itl_ms": "ITL (Inter-token Latency)",
        "output_tokens_per_s": "Output token throughput (tok/s)",
        "requests_per_s": "Request throughput (req/s)",
        "duration_s": "Benchmark duration (s)",
    },
    "guidellm": {
        "tpot_ms": "time_per_output_token_ms",
        "itl_ms": "inter_token_latency_ms",
        "output_tokens_per_s": "output_tokens_per_second (mean)",
        "requests_per_s": "requests_per_second (mean)",
        "duration_s": "measure_end - measure_start",
    },
    "aiperf": {
        "tpot_ms": "inter_token_latency",
        "itl_ms": "inter_chunk_latency",
        "output_tokens_per_s": "output_token_throughput",
        "requests_per_s": "request_throughput",
        "duration_s": "benchmark_duration",
    },
}

#: The statistics of the block each tool itself prints (the others are computed the same
#: way for comparison, but the tool does not show them).
REPORTED_STATS: dict[Tool, tuple[str, ...]] = {
    # mean, median, std and --metric-percentiles (default 99).
    "vllm": ("count", "mean", "std", "p50", "p99"),
    # Every statistic of the block (and more percentiles), over successful requests.
    "guidellm": STAT_KEYS,
    # avg, min, max, std and p1 to p99; no p99.9.
    "aiperf": ("count", "mean", "std", "min", "p50", "p90", "p95", "p99", "max"),
}

DIFFERENCES: dict[Tool, tuple[str, ...]] = {
    "vllm": (
        "TPOT: (latency - TTFT) / (output tokens - 1), the latency ending at the last chunk "
        "that carried choices, so the same span as infercost's (t_last - t_first); but a "
        "request with 2 or more tokens that came in one event counts as 0 ms, where "
        "infercost leaves it out.",
        "ITL: every gap between consecutive chunks, pooled over all requests, one value per "
        "gap whatever the chunk carried; infercost counts a gap of an event carrying k tokens "
        "k times at gap / k, so with multi-token chunks vLLM's ITL is larger and its count "
        "smaller.",
        "Throughput: output tokens (and requests) of successful requests / benchmark "
        "duration, a clock started before the first request was due and stopped when the "
        "last one ended: here max(t_end) - min(t_sched) of the measured requests, where "
        "infercost starts at the first send, min(t_send).",
        "vLLM's client also times the role-only first chunk and any content-less chunk with "
        "choices (vLLM sends the role chunk together with the first token, so its ITL then "
        "holds one near-0 ms gap per request); infercost stores content events only, so "
        "this recomputation starts at the first content event.",
        "Releases before vLLM PR #55508 ended an openai-chat request's latency at the "
        "trailing usage chunk, about t_end: their TPOT adds (t_end - t_last) / "
        "(output tokens - 1) to this one.",
        "Statistics: NumPy linear percentiles and population std, as infercost; vLLM prints "
        "mean, median, std and the percentiles asked for (p99 by default).",
    ),
    "guidellm": (
        "TPOT (time_per_output_token_ms): (t_last - t_send) / output tokens, so it includes "
        "the time to the first token and divides by every token; infercost excludes the "
        "first token from both. A 1-token request counts (its TPOT is its TTFT).",
        "ITL (inter_token_latency_ms): (t_last - t_first) / (output tokens - 1) per request, "
        "which is infercost's TPOT; a request whose tokens all came in one event counts as "
        "0 ms.",
        "Both distributions are weighted by tokens (TPOT by output tokens, ITL by output "
        "tokens - 1), so the mean is a token-weighted mean, not a mean over requests, and "
        "count is the summed weight.",
        "Percentiles: the smallest value whose cumulative weight reaches the percentile "
        "(no interpolation); infercost interpolates linearly between order statistics.",
        "Output tokens/s: the mean of GuideLLM's rate distribution, which is all output "
        "tokens of successful requests / (last token - first token of the run), "
        "max(t_last) - min(t_first); infercost divides by max(t_end) - min(t_send).",
        "Requests/s: successful requests / (measure end - measure start), here max(t_end) - "
        "min(t_sched) of the measured requests.",
    ),
    "aiperf": (
        "TPOT is AIPerf's inter_token_latency: (request latency - TTFT) / (output tokens - "
        "first chunk's tokens), the request latency ending at the last content response "
        "(t_last). The first chunk's tokens are taken from per-chunk usage when known (as "
        "with aiperf --per-chunk-usage), else 1; infercost always subtracts 1, so a "
        "multi-token first chunk makes AIPerf's TPOT larger. A request whose tokens all "
        "came in one event counts as 0 ms; infercost leaves it out.",
        "ITL is AIPerf's inter_chunk_latency: every gap between consecutive content "
        "responses, pooled over requests, one value per gap; infercost weights a k-token "
        "event's gap k times at gap / k.",
        "Throughput: output tokens (and requests) of successful requests / benchmark "
        "duration = the last content response - the first request sent, max(t_last) - "
        "min(t_send) over successful requests; infercost ends at max(t_end) of all measured "
        "requests, so AIPerf's window is shorter and its throughput higher.",
        "AIPerf counts output tokens with its own tokenizer unless told to use the "
        "server's count; this recomputation uses the count infercost stored (count_source).",
        "Statistics: linear percentiles and population std, as infercost; AIPerf prints "
        "avg, min, max, std and p1 to p99 (no p99.9).",
    ),
}


#: The definitions that read every content event's time (vLLM's and AIPerf's ITL pool the
#: gaps between them); the others need only each request's first and last event.
READS_CHUNK_TIMES: frozenset[Tool] = frozenset({"vllm", "aiperf"})


@dataclass(frozen=True, slots=True)
class Sample:
    """One stored request (a request_samples row), as the definitions need it.

    `t_sched` and `t_send` are seconds from the run's start; `e2e_ms` and `chunk_times_ms`
    (the arrival of each content event) are milliseconds from `t_send`, as stored.
    `first_chunk_tokens` is chunk_tokens[0], the tokens of the first content event, known
    only with continuous usage (the one token count any of these definitions reads).
    """

    t_sched: float
    t_send: float
    e2e_ms: float | None
    n_out: int
    chunk_times_ms: Sequence[float] | np.ndarray
    first_chunk_tokens: int | None = None
    succeeded: bool = True
    warmup: bool = False


@dataclass(frozen=True, slots=True)
class Samples:
    """A run's stored requests as columns, one element per request, in one order.

    What `recompute` reads: a hundred thousand requests are a few arrays, not a hundred
    thousand objects. Units as in `Sample`; a value that was not stored is NaN (`e2e_ms`,
    and `first_ms` / `last_ms`, the first and last content event, for a request without
    one) or 0 (`first_chunk_tokens`). `chunk_times_ms` is every request's content events
    one request after another (`chunk_counts` of them each), or None where the caller did
    not read them: only the definitions in READS_CHUNK_TIMES need them.
    """

    t_sched: np.ndarray
    t_send: np.ndarray
    e2e_ms: np.ndarray
    n_out: np.ndarray
    first_ms: np.ndarray
    last_ms: np.ndarray
    chunk_counts: np.ndarray
    first_chunk_tokens: np.ndarray
    succeeded: np.ndarray
    warmup: np.ndarray
    chunk_times_ms: np.ndarray | None = None

    @classmethod
    def of(cls, samples: Iterable[Sample]) -> Samples:
        """The columns of per-request samples (for small runs and tests)."""
        rows = list(samples)
        times = [np.asarray(s.chunk_times_ms, dtype=np.float64) for s in rows]

        def floats(values: Iterable[float | None]) -> np.ndarray:
            return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            t_sched=floats(s.t_sched for s in rows),
            t_send=floats(s.t_send for s in rows),
            e2e_ms=floats(s.e2e_ms for s in rows),
            n_out=np.array([s.n_out for s in rows], dtype=np.int64),
            first_ms=floats(t[0] if t.size else None for t in times),
            last_ms=floats(t[-1] if t.size else None for t in times),
            chunk_counts=np.array([t.size for t in times], dtype=np.int64),
            first_chunk_tokens=np.array([s.first_chunk_tokens or 0 for s in rows], dtype=np.int64),
            succeeded=np.array([s.succeeded for s in rows], dtype=bool),
            warmup=np.array([s.warmup for s in rows], dtype=bool),
            chunk_times_ms=np.concatenate(times) if times else np.empty(0),
        )


@dataclass(frozen=True, slots=True)
class ToolFigures:
    """A run's figures under one tool's definitions, with how they differ from infercost's."""

    tool: Tool
    tpot_ms: Stats
    itl_ms: Stats
    output_tokens_per_s: float | None
    requests_per_s: float | None
    duration_s: float | None
    metric_names: dict[str, str]
    reported_stats: tuple[str, ...]
    differences: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Run:
    """The columns every definition starts from: which requests count, and when each ended."""

    s: Samples
    measured: np.ndarray  # not warm-up
    ok: np.ndarray  # measured and successful
    has_chunks: np.ndarray  # at least one content event
    last: np.ndarray  # last content event, else e2e_ms (ms from t_send); NaN when neither

    @classmethod
    def of(cls, s: Samples) -> _Run:
        measured = ~s.warmup
        has_chunks = s.chunk_counts > 0
        return cls(
            s=s,
            measured=measured,
            ok=measured & s.succeeded,
            has_chunks=has_chunks,
            last=np.where(has_chunks, s.last_ms, s.e2e_ms),
        )

    def request_window(self) -> float | None:
        """max(t_end) - min(t_sched) of the measured requests (t_end where stored)."""
        s, measured = self.s, self.measured
        ends = s.t_send + s.e2e_ms / 1000.0
        return _span(ends[measured & ~np.isnan(s.e2e_ms)], s.t_sched[measured])


def _pooled_gaps(s: Samples, keep: np.ndarray) -> np.ndarray:
    """Every gap between consecutive content events of each request in `keep`, pooled (ms),
    with no per-token weighting: one value per gap, as vLLM and AIPerf record them."""
    if s.chunk_times_ms is None:
        raise ValueError("pooled gaps need every chunk time: read chunk_times_ms")
    counts = s.chunk_counts
    flat = np.asarray(s.chunk_times_ms, dtype=np.float64)
    if flat.size != int(counts.sum()):
        raise ValueError("chunk_times_ms does not hold chunk_counts events")
    if flat.size == 0:
        return np.empty(0)
    gaps = np.diff(flat)
    # A gap counts when its later event belongs to a kept request...
    wanted = np.repeat(keep, counts)[1:]
    # ...and is not that request's first event (which follows the previous one's last).
    ends = np.cumsum(counts)[counts > 0]
    wanted[ends[:-1] - 1] = False
    pooled: np.ndarray = gaps[wanted]
    return pooled


def _rate(amount: float, span: float | None) -> float | None:
    return None if span is None or span <= 0 else float(amount / span)


def _span(ends: np.ndarray, starts: np.ndarray) -> float | None:
    """max(ends) - min(starts), or None when either is empty or it is not positive."""
    if ends.size == 0 or starts.size == 0:
        return None
    end, start = float(ends.max()), float(starts.min())
    return None if end <= start else end - start


def weighted_distribution(
    values: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray
) -> Stats:
    """GuideLLM's DistributionSummary.from_values: a weighted distribution whose
    percentile p is the smallest value with cumulative weight >= p (no interpolation);
    mean and population std are weighted; count is the summed weight, rounded."""
    arr = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    count = round(float(w.sum())) if w.size else 0
    # Sorted distinct values, each with its summed weight.
    uniq, inverse = np.unique(arr, return_inverse=True)
    combined = np.bincount(inverse.reshape(-1), weights=w, minlength=uniq.size)
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
        # Rounding can leave the last cumulative weight a hair under q: take the maximum.
        index = min(int(np.searchsorted(cdf, q, side="left")), uniq.size - 1)
        out[key] = float(uniq[index])
    out["max"] = float(uniq[-1])
    return out


def _vllm(run: _Run) -> ToolFigures:
    s, ok = run.s, run.ok
    # Requests of 2 or more tokens with a content event; one event gives 0 / (n - 1).
    sel = ok & (s.n_out > 1) & run.has_chunks
    tpot = (s.last_ms[sel] - s.first_ms[sel]) / (s.n_out[sel] - 1)
    duration = run.request_window()
    return _figures(
        "vllm",
        tpot_ms=distribution(tpot),
        itl_ms=distribution(_pooled_gaps(s, ok)),
        output_tokens_per_s=_rate(int(s.n_out[ok].sum()), duration),
        requests_per_s=_rate(int(ok.sum()), duration),
        duration_s=duration,
    )


def _guidellm(run: _Run) -> ToolFigures:
    s, last = run.s, run.last
    # Successful requests with tokens and an end (the last content event, else the end of
    # the response: where GuideLLM ends a request that streamed no content event).
    timed = run.ok & (s.n_out > 0) & ~np.isnan(last)
    multi = timed & (s.n_out > 1)
    # GuideLLM's ITL is 0 (not absent) when no first token was timed, at weight n_out - 1.
    itl = np.where(
        run.has_chunks[multi],
        (s.last_ms[multi] - s.first_ms[multi]) / (s.n_out[multi] - 1),
        0.0,
    )
    # Its token events: the first token at t_first, the rest up to t_last (all of them at
    # the end for a request without a first token), so the rate's mean spans these.
    first = np.where(run.has_chunks, s.first_ms, last)
    token_span = _span(
        s.t_send[timed] + last[timed] / 1000.0, s.t_send[timed] + first[timed] / 1000.0
    )
    window = run.request_window()
    return _figures(
        "guidellm",
        tpot_ms=weighted_distribution(last[timed] / s.n_out[timed], s.n_out[timed]),
        itl_ms=weighted_distribution(itl, s.n_out[multi] - 1),
        output_tokens_per_s=_rate(int(s.n_out[timed].sum()), token_span),
        requests_per_s=_rate(int(run.ok.sum()), window),
        duration_s=window,
    )


def _aiperf_decode_tokens(n_out: np.ndarray, first_chunk_tokens: np.ndarray) -> np.ndarray:
    """AIPerf's ITL divisor: output tokens less the first content chunk's tokens when the
    server reported them (per-chunk usage), falling back to less 1 when that count is
    missing (0) or inconsistent, as AIPerf does."""
    fallback = (first_chunk_tokens <= 0) | (n_out - first_chunk_tokens < 1)
    return np.where(fallback, n_out - 1, n_out - first_chunk_tokens)


def _aiperf(run: _Run) -> ToolFigures:
    s, last = run.s, run.last
    # Successful requests with an end: the last content response, else the response's end.
    timed = run.ok & ~np.isnan(last)
    sel = timed & (s.n_out >= 2) & run.has_chunks
    tpot = (s.last_ms[sel] - s.first_ms[sel]) / _aiperf_decode_tokens(
        s.n_out[sel], s.first_chunk_tokens[sel]
    )
    sent = s.t_send[timed]
    duration = _span(sent + last[timed] / 1000.0, sent)
    return _figures(
        "aiperf",
        tpot_ms=distribution(tpot),
        itl_ms=distribution(_pooled_gaps(s, run.ok)),
        output_tokens_per_s=_rate(int(s.n_out[timed].sum()), duration),
        requests_per_s=_rate(int(timed.sum()), duration),
        duration_s=duration,
    )


def _figures(
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


_BY_TOOL: dict[Tool, Callable[[_Run], ToolFigures]] = {
    "vllm": _vllm,
    "guidellm": _guidellm,
    "aiperf": _aiperf,
}


def recompute(tool: Tool, samples: Samples | Iterable[Sample]) -> ToolFigures:
    """The run's TPOT, ITL and throughput as `tool` defines them, from its raw samples.

    Warm-up requests are left out, as from infercost's own figures; latencies come from
    successful requests only, as in each of the three tools.
    """
    if tool not in _BY_TOOL:
        raise ValueError(f"unknown tool {tool!r}: use one of {', '.join(TOOLS)}")
    columns = samples if isinstance(samples, Samples) else Samples.of(samples)
    return _BY_TOOL[tool](_Run.of(columns))
