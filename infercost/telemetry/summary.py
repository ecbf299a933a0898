"""Summarise scraped telemetry over a run's measured window (docs/figures.md, Telemetry and Cost).

Rules, so every figure means one thing:

- Gauges are averaged over time, not over samples: each reading holds until the next one
  (a step function, as a scraper at a fixed cadence sees it), clipped to the window; the
  last reading before the window holds into it. A window edge before the first reading is
  left out of the average rather than guessed.
- DCGM series are per GPU (labels `gpu`, MIG `GPU_I_ID`, per host): averaged per GPU over
  time, then averaged across GPUs (utilisation, SM activity) or summed (power, memory).
- `gpu_util_p95` is the time-weighted 95th percentile of the GPU-averaged utilisation: the
  smallest value it stayed at or below for 95% of the covered time.
- Engine series (several `model_name` or `engine` labels, several URLs) are summed for
  running and waiting requests; KV cache usage is averaged across engines and its max is
  the fullest engine's.
- Counters become increases over the window: resets (a value below the previous one) count
  as a restart from zero, the counter is interpolated linearly at the window edges, and
  an increase seen over only part of the window is scaled to the whole of it.
- Prefix cache hit rate = increase in hits / increase in queries when the counters exist
  (vLLM v1), else the time average of the engine's hit-rate gauge, else the share of
  prompt tokens served from the cache (llama.cpp's counters).
- Prompt tokens count cached ones too: llama.cpp's own counter leaves them out, so its
  total is computed + cached. Token rates are increases over the window / its length,
  the server's side of the client's throughput.
- Busy slots (llama.cpp) = increase of busy-slot-decodes / increase of decode calls over
  the window; the server publishes only the mean since it started, so busy-slot-decodes
  are rebuilt at each scrape as that mean x its decode count.
- A queue in front of the engine (waiting requests above zero) is said in `notes`.
- Energy = the increase of DCGM's energy counter when present, else the integral of total
  power (all GPUs) over the window; per output token = energy / output tokens.
- A figure without data is None, never zero.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import msgspec

from infercost.engines.metrics import MetricSpec, lookup
from infercost.telemetry.scrape import Sample, TelemetryError

#: Keys of the run summary's telemetry block, in the documented order (docs/telemetry.md).
CONTRACT_KEYS: Final = (
    "gpu_util_mean",
    "gpu_util_p95",
    "sm_active_mean",
    "power_w_mean",
    "energy_j_per_output_token",
    "kv_cache_usage_mean",
    "kv_cache_usage_max",
    "requests_running_mean",
    "requests_waiting_max",
    "prefix_cache_hit_rate",
    "errors",
)
#: A counter that covered less than this share of the window is scaled up, and said so.
_COVERAGE_NOTE_SHARE: Final = 0.9
_P95: Final = 0.95

Points = list[tuple[float, float]]
#: (start, end, value): the value held from start to end.
Segment = tuple[float, float, float]


class Telemetry(msgspec.Struct, frozen=True):
    """GPU and engine figures over the measured window, from the endpoint's metrics_urls
    (docs/figures.md, Telemetry); null where not scraped or not published.

    Fractions 0..1: utilisation, SM/DRAM/tensor activity, KV-cache usage, prefix-cache hit
    rate; power in W, energy in J, memory in bytes. Gauges are averaged over time; counters
    (tokens, preemptions, cache hits) are differences over the window. `errors` lists
    every scrape that failed and why; the run goes on regardless. `sources` names the
    metric families seen (vllm, sglang, tgi, llamacpp, dcgm); `unmapped` the names of a
    known family published but not mapped (their values are not stored). Token rates and
    cached prompt tokens come from the engine's counters over the window; `notes` says
    when requests queued in front of the engine.
    """

    gpu_util_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean GPU utilisation over the window (0 to 1)", examples=[0.93]),
    ] = None
    gpu_util_p95: Annotated[
        float | None,
        msgspec.Meta(description="95th percentile of GPU utilisation (0 to 1)", examples=[0.99]),
    ] = None
    sm_active_mean: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean share of time streaming multiprocessors were active (0 to 1, DCGM)",
            examples=[0.71],
        ),
    ] = None
    power_w_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean board power, in watts (all GPUs)", examples=[612.0]),
    ] = None
    energy_j_per_output_token: Annotated[
        float | None,
        msgspec.Meta(description="Energy per output token, in joules", examples=[0.33]),
    ] = None
    kv_cache_usage_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean share of the KV cache in use (0 to 1)", examples=[0.42]),
    ] = None
    kv_cache_usage_max: Annotated[
        float | None,
        msgspec.Meta(description="Largest share of the KV cache in use (0 to 1)", examples=[0.67]),
    ] = None
    requests_running_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean requests the engine was running", examples=[7.8]),
    ] = None
    requests_waiting_max: Annotated[
        float | None,
        msgspec.Meta(description="Most requests waiting in the engine's queue", examples=[0.0]),
    ] = None
    prefix_cache_hit_rate: Annotated[
        float | None,
        msgspec.Meta(
            description="Prefix-cache hits over lookups in the window (0 to 1)", examples=[0.05]
        ),
    ] = None
    errors: Annotated[
        list[str],
        msgspec.Meta(
            description="Every scrape that failed, and why (the run goes on regardless)",
            examples=[[]],
        ),
    ] = []
    requests_running_max: Annotated[
        float | None,
        msgspec.Meta(description="Most requests the engine was running", examples=[8.0]),
    ] = None
    requests_waiting_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean requests waiting in the engine's queue", examples=[0.0]),
    ] = None
    memory_used_bytes_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean GPU memory in use, in bytes", examples=[132000000000.0]),
    ] = None
    dram_active_mean: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean share of time GPU memory was busy (0 to 1, DCGM)", examples=[0.55]
        ),
    ] = None
    tensor_active_mean: Annotated[
        float | None,
        msgspec.Meta(
            description="Mean share of time tensor cores were active (0 to 1, DCGM)",
            examples=[0.31],
        ),
    ] = None
    energy_j: Annotated[
        float | None,
        msgspec.Meta(description="Energy used over the window, in joules", examples=[37800.0]),
    ] = None
    energy_source: Annotated[
        str | None,
        msgspec.Meta(
            description="Where energy came from: energy_counter (the GPU's counter) or power (mean "
            "power times the window)",
            examples=["energy_counter"],
        ),
    ] = None
    prompt_tokens: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt tokens the engine processed in the window (its counter), in tokens",
            examples=[102400.0],
        ),
    ] = None
    generation_tokens: Annotated[
        float | None,
        msgspec.Meta(
            description="Output tokens the engine generated in the window (its counter), in tokens",
            examples=[25600.0],
        ),
    ] = None
    preemptions: Annotated[
        float | None,
        msgspec.Meta(description="Requests the engine preempted in the window", examples=[0.0]),
    ] = None
    prompt_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt tokens per second by the engine's counter, in tokens/s",
            examples=[1650.0],
        ),
    ] = None
    generation_tokens_per_s: Annotated[
        float | None,
        msgspec.Meta(
            description="Output tokens per second by the engine's counter, in tokens/s",
            examples=[1830.0],
        ),
    ] = None
    prompt_tokens_cached: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt tokens served from the prefix cache (engine counter), in tokens",
            examples=[3072.0],
        ),
    ] = None
    prompt_tokens_computed: Annotated[
        float | None,
        msgspec.Meta(
            description="Prompt tokens the engine computed, in tokens", examples=[99328.0]
        ),
    ] = None
    prompt_tokens_cached_share: Annotated[
        float | None,
        msgspec.Meta(description="prompt_tokens_cached / prompt_tokens (0 to 1)", examples=[0.03]),
    ] = None
    prompt_seconds: Annotated[
        float | None,
        msgspec.Meta(
            description="Seconds the engine spent on prompt processing in the window",
            examples=[12.4],
        ),
    ] = None
    generation_seconds: Annotated[
        float | None,
        msgspec.Meta(
            description="Seconds the engine spent generating in the window (llama.cpp sums them "
            "over its slots, so they can exceed the window)",
            examples=[58.1],
        ),
    ] = None
    busy_slots_per_decode: Annotated[
        float | None,
        msgspec.Meta(description="Mean slots busy per decode step (llama.cpp)", examples=[7.6]),
    ] = None
    kv_cache_tokens_mean: Annotated[
        float | None,
        msgspec.Meta(description="Mean tokens held in the KV cache, in tokens", examples=[5400.0]),
    ] = None
    notes: Annotated[
        list[str],
        msgspec.Meta(
            description="Remarks on the figures, e.g. when requests queued in front of the engine",
            examples=[[]],
        ),
    ] = []
    gpu_count: Annotated[
        int | None, msgspec.Meta(description="GPUs the GPU figures cover", examples=[1])
    ] = None
    per_gpu: Annotated[
        dict[str, float],
        msgspec.Meta(
            description="Mean GPU utilisation (0 to 1) per GPU, by GPU name",
            examples=[{"0": 0.93, "1": 0.91}],
        ),
    ] = {}
    sources: Annotated[
        list[str],
        msgspec.Meta(
            description="Metric families seen: vllm, sglang, tgi, llamacpp, dcgm",
            examples=[["vllm", "dcgm"]],
        ),
    ] = []
    unmapped: Annotated[
        list[str],
        msgspec.Meta(
            description="Names of a known family's metrics that were published but not mapped (not"
            " stored)",
            examples=[[]],
        ),
    ] = []
    samples: Annotated[
        int,
        msgspec.Meta(description="Mapped metric samples read inside the window", examples=[60]),
    ] = 0

    def contract(self) -> dict[str, Any]:
        """The run summary's `telemetry` block, exactly as docs/telemetry.md lists it."""
        return {key: getattr(self, key) for key in CONTRACT_KEYS}

    def as_dict(self) -> dict[str, Any]:
        """Every figure, contract keys first."""
        return msgspec.structs.asdict(self)


def summarize(
    samples: Iterable[Sample],
    window_start: float,
    window_end: float,
    output_tokens: float | None,
    gpu_count_hint: int | None = None,
    *,
    errors: Iterable[TelemetryError | str] = (),
    unmapped: Iterable[str] = (),
) -> Telemetry:
    """Telemetry figures over [window_start, window_end] (seconds on the scraper's clock).

    `output_tokens` divides the energy; `gpu_count_hint` (the deployment's GPU count) only
    adds a note when the exporter reports a different number of GPUs; `errors` (the
    scraper's) are carried into the summary as sentences, and `unmapped` (the names the
    scraper dropped) are listed with those of unmapped samples.
    """
    notes = [str(e) for e in errors]
    a, b = float(window_start), float(window_end)
    if not b > a:
        notes.append("the measured window is empty, so there is no telemetry to summarise")
        return Telemetry(errors=notes)

    collected = _collect(samples, a, b)
    notes.extend(collected.notes)
    if collected.series and not collected.families:
        notes.append("telemetry was only read after the measured window had ended")

    gpu = _gpu_figures(collected, a, b, notes)
    energy_j, gpu_count = gpu["energy_j"], gpu["gpu_count"]
    per_token = None
    if energy_j is not None and output_tokens is not None and output_tokens > 0:
        per_token = energy_j / output_tokens

    if gpu_count_hint is not None and gpu_count is not None and gpu_count != gpu_count_hint:
        notes.append(
            f"the GPU exporter reported {gpu_count} GPUs but the endpoint declares "
            f"{gpu_count_hint}; GPU figures cover all {gpu_count} (point the metrics URL at "
            "the deployment's own exporter or correct the endpoint's gpu_count)"
        )

    engine = _engine_figures(collected, a, b)
    return Telemetry(
        **gpu,
        **engine,
        notes=_queue_notes(engine, collected),
        energy_j_per_output_token=per_token,
        errors=notes,
        sources=sorted(collected.families),
        unmapped=sorted(collected.unmapped | set(unmapped)),
        samples=collected.in_window,
    )


# -- grouping ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Series:
    spec: MetricSpec
    url: str
    labels: dict[str, str]
    points: Points = field(default_factory=list)


@dataclass(slots=True)
class _Collected:
    #: canonical figure -> its series (after choosing one source name per URL).
    series: dict[str, list[_Series]]
    families: set[str]
    unmapped: set[str]
    in_window: int
    notes: list[str]


def _collect(samples: Iterable[Sample], a: float, b: float) -> _Collected:
    by_key: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Series] = {}
    unmapped: set[str] = set()
    mapped_urls: set[str] = set()
    unmapped_by_url: dict[str, set[str]] = defaultdict(set)
    in_window = 0
    for s in samples:
        spec = lookup(s.metric)
        if spec is None:
            unmapped.add(s.metric)
            unmapped_by_url[s.url].add(s.metric)
            continue
        mapped_urls.add(s.url)
        value = s.value * spec.scale
        if not math.isfinite(value):
            continue
        key = (spec.source, s.url, tuple(sorted(s.labels.items())))
        series = by_key.get(key)
        if series is None:
            series = by_key[key] = _Series(spec, s.url, dict(s.labels))
        series.points.append((s.t, value))
        if a <= s.t <= b:
            in_window += 1

    # One source name per figure and URL: the table's preferred one among those present,
    # so a vLLM showing a deprecated name next to its replacement is not counted twice.
    preferred: dict[tuple[str, str], int] = {}
    for series in by_key.values():
        k = (series.spec.canonical, series.url)
        preferred[k] = min(preferred.get(k, series.spec.priority), series.spec.priority)
    grouped: dict[str, list[_Series]] = defaultdict(list)
    families: set[str] = set()
    for series in by_key.values():
        if series.spec.priority != preferred[(series.spec.canonical, series.url)]:
            continue
        series.points.sort()
        grouped[series.spec.canonical].append(series)
        if _covers(series.points, b):
            families.add(series.spec.family)

    notes = [
        f"telemetry from {url}: none of its {len(names)} metrics is one infercost knows "
        "(vLLM, SGLang, TGI, llama.cpp or the DCGM exporter), e.g. " + ", ".join(sorted(names)[:3])
        for url, names in unmapped_by_url.items()
        if url not in mapped_urls
    ]
    return _Collected(grouped, families, unmapped, in_window, notes)


def _covers(points: Points, b: float) -> bool:
    """Whether a (sorted) series has a reading that applies to the window ending at `b`:
    one inside it, or one before it that holds into it."""
    return bool(points) and points[0][0] <= b


# -- step functions and counters --------------------------------------------------------


def _steps(points: Points, a: float, b: float) -> Points:
    """The held series inside [a, b] as (time, value) changes; the last reading at or
    before `a` starts it at `a`."""
    start: float | None = None
    out: Points = []
    for t, v in points:
        if t <= a:
            start = v
        elif t <= b:
            out.append((t, v))
        else:
            break
    if start is not None:
        out.insert(0, (a, start))
    return out


def _segments(points: Points, a: float, b: float) -> list[Segment]:
    steps = _steps(points, a, b)
    return [(t, steps[i + 1][0] if i + 1 < len(steps) else b, v) for i, (t, v) in enumerate(steps)]


def _combine(
    all_points: Sequence[Points], a: float, b: float, how: Literal["sum", "mean"]
) -> list[Segment]:
    """Several held series combined instant by instant (only series already started count)."""
    events = sorted(
        (t, i, v) for i, points in enumerate(all_points) for t, v in _steps(points, a, b)
    )
    current: dict[int, float] = {}
    out: list[Segment] = []
    for j, (t, i, v) in enumerate(events):
        current[i] = v
        if j + 1 < len(events) and events[j + 1][0] == t:
            continue  # apply every change at this instant first
        end = events[j + 1][0] if j + 1 < len(events) else b
        total = sum(current.values())
        out.append((t, end, total if how == "sum" else total / len(current)))
    return out


def _time_mean(segments: Sequence[Segment]) -> float | None:
    if not segments:
        return None
    duration = sum(t1 - t0 for t0, t1, _ in segments)
    if duration <= 0:  # only readings exactly at the window's end
        return sum(v for _, _, v in segments) / len(segments)
    return sum(v * (t1 - t0) for t0, t1, v in segments) / duration


def _time_quantile(segments: Sequence[Segment], q: float) -> float | None:
    """Smallest value the step function stayed at or below for a share `q` of its time."""
    if not segments:
        return None
    weighted = sorted((v, t1 - t0) for t0, t1, v in segments)
    total = sum(w for _, w in weighted)
    if total <= 0:
        return weighted[-1][0]
    target = q * total
    cumulative = 0.0
    for v, w in weighted:
        cumulative += w
        if cumulative >= target * (1 - 1e-12):
            return v
    return weighted[-1][0]


def _interpolate(times: Sequence[float], values: Sequence[float], t: float) -> float:
    i = bisect.bisect_left(times, t)
    if i < len(times) and times[i] == t:
        return values[i]
    t0, t1 = times[i - 1], times[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t - t0) / (t1 - t0)


def _counter_increase(points: Points, a: float, b: float) -> tuple[float, float] | None:
    """(increase, seconds covered) of a counter over [a, b], resets counted as restarts
    from zero and the edges interpolated; None without two readings spanning the window."""
    if len(points) < 2:
        return None
    times: list[float] = []
    cumulative: list[float] = []
    total = 0.0
    previous: float | None = None
    for t, v in points:
        if times and t == times[-1]:
            continue  # a duplicate reading adds nothing
        if previous is not None:
            total += v if v < previous else v - previous
        times.append(t)
        cumulative.append(total)
        previous = v
    lo, hi = max(a, times[0]), min(b, times[-1])
    if hi <= lo:
        return None
    return _interpolate(times, cumulative, hi) - _interpolate(times, cumulative, lo), hi - lo


def _window_increase(
    series: Sequence[_Series],
    a: float,
    b: float,
    *,
    label: str = "",
    notes: list[str] | None = None,
) -> float | None:
    """Sum over series of each one's increase, scaled to the whole window; when `notes` is
    given, a note says so if a series covered much less than the window."""
    total: float | None = None
    least_covered = b - a
    for s in series:
        found = _counter_increase(s.points, a, b)
        if found is None:
            continue
        increase, covered = found
        least_covered = min(least_covered, covered)
        total = (total or 0.0) + increase * (b - a) / covered
    if notes is not None and total is not None and least_covered < _COVERAGE_NOTE_SHARE * (b - a):
        notes.append(
            f"{label} was measured over only {least_covered:.1f} s of the {b - a:.1f} s "
            "window and scaled to the whole window"
        )
    return total


# -- GPU figures ------------------------------------------------------------------------


GpuKey = tuple[str, str, str]  # (host, gpu, MIG instance)


def _gpu_key(series: _Series) -> GpuKey:
    labels = series.labels
    gpu = labels.get("gpu") or labels.get("device") or labels.get("UUID") or "?"
    mig = labels.get("GPU_I_ID", "")
    host = labels.get("Hostname") or labels.get("hostname") or urlsplit(series.url).netloc
    return host, gpu, mig


def _gpu_names(keys: Iterable[GpuKey]) -> dict[GpuKey, str]:
    keys = sorted(set(keys))
    one_host = len({host for host, _, _ in keys}) <= 1
    names = {}
    for key in keys:
        host, gpu, mig = key
        name = gpu if not mig else f"{gpu}/mig{mig}"
        names[key] = name if one_host else f"{host}:{name}"
    return names


def _per_gpu_means(series: Sequence[_Series], a: float, b: float) -> dict[GpuKey, float]:
    """Each GPU's time average; several series of one GPU are averaged."""
    by_gpu: dict[GpuKey, list[float]] = defaultdict(list)
    for s in series:
        mean = _time_mean(_segments(s.points, a, b))
        if mean is not None:
            by_gpu[_gpu_key(s)].append(mean)
    return {key: sum(values) / len(values) for key, values in by_gpu.items()}


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _sum(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) if values else None


#: Telemetry field, canonical figure, how GPUs combine: the per-GPU time averages
#: beyond utilisation.
_GPU_MEANS: Final = (
    ("sm_active_mean", "sm_active", _mean),
    ("dram_active_mean", "dram_active", _mean),
    ("tensor_active_mean", "tensor_active", _mean),
    ("memory_used_bytes_mean", "memory_used", _sum),
    ("power_w_mean", "power", _sum),
)


def _gpu_figures(c: _Collected, a: float, b: float, notes: list[str]) -> dict[str, Any]:
    """The GPU figures, keyed by Telemetry field."""
    seen: set[GpuKey] = set()
    for canonical in ("gpu_util", "sm_active", "dram_active", "tensor_active", "power",
                      "memory_used", "energy"):  # fmt: skip
        seen |= {_gpu_key(s) for s in c.series.get(canonical, []) if _covers(s.points, b)}

    util = c.series.get("gpu_util", [])
    util_by_gpu = _per_gpu_means(util, a, b)
    names = _gpu_names(util_by_gpu)
    figures: dict[str, Any] = {
        "gpu_count": len(seen) or None,
        "gpu_util_mean": _mean(util_by_gpu.values()),
        "gpu_util_p95": _time_quantile(_combine([s.points for s in util], a, b, "mean"), _P95),
        "per_gpu": {names[key]: value for key, value in sorted(util_by_gpu.items())},
        "energy_j": None,
        "energy_source": None,
    }
    for name, canonical, combine in _GPU_MEANS:
        figures[name] = combine(_per_gpu_means(c.series.get(canonical, []), a, b).values())

    energy = _window_increase(c.series.get("energy", []), a, b, label="GPU energy", notes=notes)
    if energy is not None:
        figures["energy_j"], figures["energy_source"] = energy, "energy_counter"
        if figures["power_w_mean"] is None:
            figures["power_w_mean"] = energy / (b - a)
    elif figures["power_w_mean"] is not None:
        figures["energy_j"], figures["energy_source"] = figures["power_w_mean"] * (b - a), "power"
    return figures


# -- engine figures -----------------------------------------------------------------------


def _max(segments: Sequence[Segment]) -> float | None:
    return max((v for _, _, v in segments), default=None)


def _increase_by_url(series: Sequence[_Series], a: float, b: float) -> dict[str, float]:
    """Each URL's counter increase over the window (its series summed), where known."""
    by_url: dict[str, list[_Series]] = defaultdict(list)
    for one in series:
        by_url[one.url].append(one)
    out = {}
    for url, group in by_url.items():
        increase = _window_increase(group, a, b)
        if increase is not None:
            out[url] = increase
    return out


def _busy_slots(c: _Collected, a: float, b: float) -> float | None:
    """Busy slots per decode over the window, summed over engines (llama.cpp).

    The gauge is the mean since start (busy-slot-decodes / decodes), read together with
    the decode counter in the same scrape, so mean x decodes is a running total too.
    """
    decodes = {
        (s.url, tuple(sorted(s.labels.items()))): s for s in c.series.get("decode_calls", [])
    }
    total: float | None = None
    for gauge in c.series.get("busy_slots_per_decode", []):
        counter = decodes.get((gauge.url, tuple(sorted(gauge.labels.items()))))
        if counter is None:
            continue
        n_at = dict(counter.points)
        product = [(t, v * n_at[t]) for t, v in gauge.points if t in n_at]
        busy = _counter_increase(product, a, b)
        calls = _counter_increase([(t, n_at[t]) for t, _ in product], a, b)
        if busy is None or calls is None or calls[0] <= 0:
            continue
        total = (total or 0.0) + max(0.0, busy[0] / calls[0])
    return total


def _prompt_figures(c: _Collected, a: float, b: float) -> dict[str, float | None]:
    """Prompt tokens (cached ones included), cached, computed and the cached share, per URL
    then summed; a share only over URLs where both parts are known."""
    total = _increase_by_url(c.series.get("prompt_tokens", []), a, b)
    computed = _increase_by_url(c.series.get("prompt_tokens_computed", []), a, b)
    cached = _increase_by_url(c.series.get("prompt_tokens_cached", []), a, b)
    if not cached:  # an older vLLM: its prefix-cache hits are cached prompt tokens
        cached = _increase_by_url(c.series.get("prefix_cache_hits", []), a, b)
    for url, n in computed.items():
        if url not in total and url in cached:
            total[url] = n + cached[url]
    for url, n in total.items():
        if url not in computed and url in cached:
            computed[url] = max(0.0, n - cached[url])
    both = [url for url in total if url in cached]
    share_of = sum(total[u] for u in both)
    return {
        "prompt_tokens": _sum(total.values()),
        "prompt_tokens_cached": _sum(cached.values()),
        "prompt_tokens_computed": _sum(computed.values()),
        "prompt_tokens_cached_share": (
            sum(cached[u] for u in both) / share_of if both and share_of > 0 else None
        ),
    }


def _engine_figures(c: _Collected, a: float, b: float) -> dict[str, Any]:
    """The engine figures, keyed by Telemetry field."""
    running = _combine([s.points for s in c.series.get("requests_running", [])], a, b, "sum")
    waiting = _combine([s.points for s in c.series.get("requests_waiting", [])], a, b, "sum")
    kv_series = c.series.get("kv_cache_usage", [])
    kv_tokens = c.series.get("kv_cache_tokens", [])
    prompt = _prompt_figures(c, a, b)

    hits = _window_increase(c.series.get("prefix_cache_hits", []), a, b)
    queries = _window_increase(c.series.get("prefix_cache_queries", []), a, b)
    gauge = c.series.get("prefix_cache_hit_rate", [])
    if queries is not None and hits is not None:
        prefix_hit_rate = hits / queries if queries > 0 else None
    elif gauge:
        prefix_hit_rate = _time_mean(_combine([s.points for s in gauge], a, b, "mean"))
    else:  # llama.cpp: cached / all prompt tokens is the same ratio, in tokens
        prefix_hit_rate = prompt["prompt_tokens_cached_share"]

    generation = _window_increase(c.series.get("generation_tokens", []), a, b)
    seconds = b - a
    return {
        "requests_running_mean": _time_mean(running),
        "requests_running_max": _max(running),
        "requests_waiting_mean": _time_mean(waiting),
        "requests_waiting_max": _max(waiting),
        "kv_cache_usage_mean": _time_mean(_combine([s.points for s in kv_series], a, b, "mean")),
        "kv_cache_usage_max": max(
            (v for s in kv_series for _, _, v in _segments(s.points, a, b)), default=None
        ),
        "kv_cache_tokens_mean": _time_mean(_combine([s.points for s in kv_tokens], a, b, "sum")),
        "prefix_cache_hit_rate": prefix_hit_rate,
        # Only energy reaches a contract figure, so only its extrapolation is worth a note.
        **prompt,
        "generation_tokens": generation,
        "prompt_tokens_per_s": (
            None if prompt["prompt_tokens"] is None else prompt["prompt_tokens"] / seconds
        ),
        "generation_tokens_per_s": None if generation is None else generation / seconds,
        "prompt_seconds": _window_increase(c.series.get("prompt_seconds", []), a, b),
        "generation_seconds": _window_increase(c.series.get("generation_seconds", []), a, b),
        "busy_slots_per_decode": _busy_slots(c, a, b),
        "preemptions": _window_increase(c.series.get("preemptions", []), a, b),
    }


def _queue_notes(engine: dict[str, Any], c: _Collected) -> list[str]:
    """A sentence when requests waited in the engine's queue during the window."""
    most = engine["requests_waiting_max"]
    if most is None or most <= 0:
        return []
    what = (
        "waited for a free slot"
        if {s.spec.family for s in c.series.get("requests_waiting", [])} == {"llamacpp"}
        else "waited in the engine's queue"
    )
    running = engine["requests_running_max"]
    beside = "" if running is None else f", beside up to {running:g} running"
    return [
        f"requests queued in front of the engine: up to {most:g} {what} "
        f"(mean {engine['requests_waiting_mean']:.2g}{beside}); latency includes that wait, "
        "so the engine was saturated at this load"
    ]
