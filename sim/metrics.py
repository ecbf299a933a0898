"""GET /metrics of the simulator: live counters, named as each real engine names them.

`SimMetrics` holds the simulator's own state (what ran, waited, was computed or served from
the prefix cache). Each SimApp owns a prometheus_client CollectorRegistry (`registry`) with
custom collectors: `FamiliesCollector` publishes SimMetrics under one engine's names
(--metrics, or the --engine profile; "default" is the simulator's original vLLM-style set),
and in gpu mode `GpuCollector` adds the modelled GPU's telemetry (DCGM gauges per GPU, and
vLLM's KV-cache gauges with the default set). Names, types and help texts come from the
engines: llama-server's from the captured shared/fixtures/llama-server/metrics.prom (in that
order), vLLM's from its v1 and v0 Prometheus loggers, SGLang's from
sglang/srt/metrics/collector.py, TGI's from its router (`metrics::gauge!`/`counter!` calls
and the describe_* table in router/src/server.rs), DCGM's from dcgm-exporter.

`exposition` writes a registry with prometheus_client's `generate_latest`, except counters
whose real name has no `_total` suffix (llama.cpp's n_tokens_max, TGI's counters and DCGM's
energy counter, exposed as they are named): generate_latest would name their family
`..._total`, so those are written by `_plain` in the same format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from sim.gpu import GpuEngine

Labels = dict[str, str]


class SimMetrics:
    """Live counters behind GET /metrics. In gpu mode the engine owns running, waiting and
    the token counters; the app copies them here before each render."""

    __slots__ = (
        "busy_slot_sum",
        "cached_tokens",
        "generation_tokens",
        "kv_usage",
        "kv_used_tokens",
        "n_decode",
        "n_tokens_max",
        "predicted_seconds",
        "prefix_hits",
        "prefix_queries",
        "prompt_seconds",
        "prompt_tokens",
        "request_success",
        "requests_total",
        "running",
        "running_max_tokens",
        "running_peak",
        "success_by_reason",
        "waiting",
    )

    def __init__(self) -> None:
        self.running = 0
        self.waiting = 0  # requests queued behind --max-concurrency (gpu: the engine's queue)
        self.prompt_tokens = 0  # all prompt tokens of admitted requests, cached ones included
        self.cached_tokens = 0  # of those, served from the prefix cache
        self.generation_tokens = 0
        self.request_success = 0
        self.success_by_reason: dict[str, int] = {}
        self.requests_total = 0  # generation requests received (TGI's tgi_request_count)
        # Prompt tokens looked up in the prefix cache, and found (vLLM's queries and hits).
        self.prefix_queries = 0
        self.prefix_hits = 0
        # llama.cpp's time counters: prompt (arrival to first token) and generation (first
        # to last token) seconds of finished requests, by the simulator's own schedule.
        self.prompt_seconds = 0.0
        self.predicted_seconds = 0.0
        self.n_decode = 0  # writes of generated tokens (fixed) or engine steps (gpu)
        self.busy_slot_sum = 0  # running requests summed over those decodes
        self.n_tokens_max = 0  # longest prompt + generation seen
        self.running_max_tokens = 0  # prompt + max_tokens of the running requests (TGI)
        self.running_peak = 0  # fixed mode: most running at once since the last reset (/stats)
        self.kv_usage = 0.0  # gpu mode: share of the KV budget reserved
        self.kv_used_tokens = 0

    def started(self) -> None:
        """Fixed mode: a request is admitted and counts as running."""
        self.running += 1
        self.running_peak = max(self.running_peak, self.running)

    def ended(self) -> None:
        """Fixed mode: a request gave up its slot and no longer counts as running."""
        self.running -= 1

    def finished(self, reason: str) -> None:
        """A request completed normally with this finish_reason."""
        self.request_success += 1
        self.success_by_reason[reason] = self.success_by_reason.get(reason, 0) + 1

    @property
    def computed_prompt_tokens(self) -> int:
        """Prompt tokens prefilled (not served from the cache)."""
        return self.prompt_tokens - self.cached_tokens


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family: its exposed name, type, help and samples (labels, value)."""

    name: str
    kind: Literal["counter", "gauge"]
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)


def _metric(fam: Family) -> Metric:
    """The family as prometheus_client's Metric: a counter's family name drops `_total`
    (generate_latest adds it back); its samples keep the exposed name."""
    base = fam.name.removesuffix("_total") if fam.kind == "counter" else fam.name
    metric = Metric(base, fam.help, fam.kind)
    for labels, value in fam.samples:
        metric.add_sample(fam.name, labels, value)
    return metric


class _Collected(Collector):
    """Families already collected, for generate_latest."""

    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


def _unsuffixed_counter(metric: Metric) -> bool:
    """A counter exposed under its own name, without `_total` (see the module doc)."""
    return metric.type == "counter" and any(s.name == metric.name for s in metric.samples)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _plain(metric: Metric) -> bytes:
    """A counter named without `_total`, in generate_latest's format but under its name."""
    lines = [f"# HELP {metric.name} {metric.documentation}", f"# TYPE {metric.name} counter"]
    for sample in metric.samples:
        pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(sample.labels.items()))
        series = f"{sample.name}{{{pairs}}}" if pairs else sample.name
        value: str = floatToGoString(sample.value)  # type: ignore[no-untyped-call]
        lines.append(f"{series} {value}")
    return ("\n".join(lines) + "\n").encode()


def exposition(registry: Collector) -> bytes:
    """Prometheus text format (0.0.4) of everything the registry collects, in order."""
    parts: list[bytes] = []
    run: list[Metric] = []  # consecutive families generate_latest writes as they are
    for metric in registry.collect():
        if _unsuffixed_counter(metric):
            if run:
                parts.append(generate_latest(_Collected(run)))
                run = []
            parts.append(_plain(metric))
        else:
            run.append(metric)
    if run:
        parts.append(generate_latest(_Collected(run)))
    return b"".join(parts)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _vllm_counters(m: SimMetrics, lab: Labels, success: list[tuple[Labels, float]]) -> list[Family]:
    """The token and request counters, named and described alike by every vLLM version the
    simulator copies; `success` is the request_success_total samples (with or without a
    finished_reason label)."""
    return [
        Family("vllm:prompt_tokens_total", "counter",
               "Number of prefill tokens processed.", [(lab, m.prompt_tokens)]),
        Family("vllm:generation_tokens_total", "counter",
               "Number of generation tokens processed.", [(lab, m.generation_tokens)]),
        Family("vllm:request_success_total", "counter",
               "Count of successfully processed requests.", success),
    ]  # fmt: skip


def _default(m: SimMetrics, lab: Labels) -> list[Family]:
    return [
        Family("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.", [(lab, m.running)]),
        Family("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", [(lab, m.waiting)]),
        *_vllm_counters(m, lab, [(lab, m.request_success)]),
    ]  # fmt: skip


def _by_reason(m: SimMetrics, lab: Labels) -> list[tuple[Labels, float]]:
    reasons = sorted(m.success_by_reason) or ["stop"]
    return [({**lab, "finished_reason": r}, m.success_by_reason.get(r, 0)) for r in reasons]


def _vllm(m: SimMetrics, model: str) -> list[Family]:
    # vLLM v1 (vllm/v1/metrics/loggers.py): labels model_name and engine (the engine index).
    lab = {"model_name": model, "engine": "0"}
    return [
        Family("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.", [(lab, m.running)]),
        Family("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", [(lab, m.waiting)]),
        Family("vllm:kv_cache_usage_perc", "gauge",
               "KV-cache usage. 1 means 100 percent usage.", [(lab, m.kv_usage)]),
        Family("vllm:prefix_cache_queries_total", "counter",
               "Prefix cache queries, in terms of number of queried tokens.",
               [(lab, m.prefix_queries)]),
        Family("vllm:prefix_cache_hits_total", "counter",
               "Prefix cache hits, in terms of number of cached tokens.", [(lab, m.prefix_hits)]),
        *_vllm_counters(m, lab, _by_reason(m, lab)),
    ]  # fmt: skip


def _vllm_v0(m: SimMetrics, model: str) -> list[Family]:
    # vLLM v0 (vllm/engine/metrics.py): label model_name; the prefix cache as a hit rate.
    lab = {"model_name": model}
    return [
        Family("vllm:num_requests_running", "gauge",
               "Number of requests currently running on GPU.", [(lab, m.running)]),
        Family("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", [(lab, m.waiting)]),
        Family("vllm:num_requests_swapped", "gauge",
               "Number of requests swapped to CPU.", [(lab, 0)]),
        Family("vllm:gpu_cache_usage_perc", "gauge",
               "GPU KV-cache usage. 1 means 100 percent usage.", [(lab, m.kv_usage)]),
        Family("vllm:cpu_cache_usage_perc", "gauge",
               "CPU KV-cache usage. 1 means 100 percent usage.", [(lab, 0.0)]),
        Family("vllm:gpu_prefix_cache_hit_rate", "gauge",
               "GPU prefix cache block hit rate.",
               [(lab, _ratio(m.prefix_hits, m.prefix_queries))]),
        *_vllm_counters(m, lab, _by_reason(m, lab)),
    ]  # fmt: skip


def _sglang(m: SimMetrics, model: str) -> list[Family]:
    lab = {"model_name": model}
    return [
        Family("sglang:num_running_reqs", "gauge",
               "The number of running requests.", [(lab, m.running)]),
        Family("sglang:num_used_tokens", "gauge",
               "The number of used tokens.", [(lab, m.kv_used_tokens)]),
        Family("sglang:token_usage", "gauge", "The token usage.", [(lab, m.kv_usage)]),
        Family("sglang:num_queue_reqs", "gauge",
               "The number of requests in the waiting queue.", [(lab, m.waiting)]),
        Family("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.",
               [(lab, _ratio(m.prefix_hits, m.prefix_queries))]),
        Family("sglang:prompt_tokens_total", "counter",
               "Number of prefill tokens processed.", [(lab, m.prompt_tokens)]),
        Family("sglang:generation_tokens_total", "counter",
               "Number of generation tokens processed.", [(lab, m.generation_tokens)]),
        Family("sglang:cached_tokens_total", "counter",
               "Number of cached prompt tokens.", [(lab, m.cached_tokens)]),
        Family("sglang:num_requests_total", "counter",
               "Number of requests processed.", [(lab, m.request_success)]),
    ]  # fmt: skip


def _tgi(m: SimMetrics, model: str) -> list[Family]:
    # TGI has no labels on these; its counters carry no _total (Rust metrics crate).
    none: Labels = {}
    return [
        Family("tgi_request_count", "counter", "Total number of requests",
               [(none, m.requests_total)]),
        Family("tgi_request_success", "counter", "Number of successful requests",
               [(none, m.request_success)]),
        Family("tgi_queue_size", "gauge", "Current queue size", [(none, m.waiting)]),
        Family("tgi_batch_current_size", "gauge", "Current batch size", [(none, m.running)]),
        Family("tgi_batch_current_max_tokens", "gauge",
               "Maximum tokens for the current batch", [(none, m.running_max_tokens)]),
    ]  # fmt: skip


def _llamacpp(m: SimMetrics, model: str) -> list[Family]:
    # Names, types and help texts as in shared/fixtures/llama-server/metrics.prom.
    none: Labels = {}
    computed = m.computed_prompt_tokens

    def one(value: float) -> list[tuple[Labels, float]]:
        return [(none, value)]

    return [
        Family("llamacpp:prompt_tokens_total", "counter",
               "Number of prompt tokens processed, excluding cached tokens", one(computed)),
        Family("llamacpp:prompt_tokens_cached_total", "counter",
               "Number of prompt tokens reused from the cache", one(m.cached_tokens)),
        Family("llamacpp:prompt_seconds_total", "counter",
               "Total time spent processing prompts", one(m.prompt_seconds)),
        Family("llamacpp:tokens_predicted_total", "counter",
               "Number of generation tokens processed", one(m.generation_tokens)),
        Family("llamacpp:tokens_predicted_seconds_total", "counter",
               "Total time spent generating tokens", one(m.predicted_seconds)),
        Family("llamacpp:n_decode_total", "counter",
               "Total number of llama_decode() calls, excluding speculative decoding and "
               "multimodal decoding", one(m.n_decode)),
        Family("llamacpp:n_tokens_max", "counter",
               "Largest observed sequence length (prompt + generation)", one(m.n_tokens_max)),
        Family("llamacpp:spec_decode_num_draft_tokens_total", "counter",
               "Speculative: Total draft tokens generated", one(0)),
        Family("llamacpp:spec_decode_num_accepted_tokens_total", "counter",
               "Speculative: Total draft tokens accepted by the target model", one(0)),
        Family("llamacpp:spec_decode_num_drafts_total", "counter",
               "Speculative: Total speculative decoding verification steps", one(0)),
        Family("llamacpp:prompt_tokens_seconds", "gauge",
               "Average prompt throughput in tokens/s", one(_ratio(computed, m.prompt_seconds))),
        Family("llamacpp:predicted_tokens_seconds", "gauge",
               "Average generation throughput in tokens/s",
               one(_ratio(m.generation_tokens, m.predicted_seconds))),
        Family("llamacpp:requests_processing", "gauge",
               "Number of requests processing", one(m.running)),
        Family("llamacpp:requests_deferred", "gauge",
               "Number of requests deferred", one(m.waiting)),
        Family("llamacpp:n_busy_slots_per_decode", "gauge",
               "Average number of busy slots per llama_decode() call",
               one(_ratio(m.busy_slot_sum, m.n_decode))),
    ]  # fmt: skip


def _default_set(m: SimMetrics, model: str) -> list[Family]:
    # The simulator's original set, unchanged for existing scrapers.
    return _default(m, {"model_name": model})


_FLAVORS: Final[dict[str, Callable[[SimMetrics, str], list[Family]]]] = {
    "default": _default_set,
    "vllm": _vllm,
    "vllm-v0": _vllm_v0,
    "sglang": _sglang,
    "tgi": _tgi,
    "llamacpp": _llamacpp,
    # No /metrics route at all (transformers serve); nothing to publish.
    "none": lambda _metrics, _model: [],
}


class FamiliesCollector(Collector):
    """The live SimMetrics under one engine's names (see config.MetricsFlavor); `source`
    returns the state to publish, brought up to date (gpu mode copies the engine's)."""

    def __init__(self, flavor: str, model: str, source: Callable[[], SimMetrics]) -> None:
        self._families = _FLAVORS[flavor]
        self._model = model
        self._source = source

    def collect(self) -> Iterator[Metric]:
        for fam in self._families(self._source(), self._model):
            yield _metric(fam)


# vLLM's KV-cache gauges, published beside the default set in gpu mode.
_KV_FAMILIES: Final = (
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
    ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage."),
)
# (name, type, help) as dcgm-exporter publishes them; the values are the model's.
_DCGM_FAMILIES: Final[tuple[tuple[str, Literal["counter", "gauge"], str], ...]] = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge",
     "The ratio of cycles an SM has at least 1 warp assigned (in %)."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data (in %)."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
     "Ratio of cycles the tensor (HMMA) pipe is active (in %)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
)  # fmt: skip


class GpuCollector(Collector):
    """The modelled GPU's telemetry at `clock()`: per-GPU DCGM families as dcgm-exporter
    publishes them (labels gpu, device, modelName) and, with `kv_gauges`, vLLM's KV-cache
    gauges labelled model_name (the default set has no KV gauge of its own)."""

    def __init__(
        self,
        engine: GpuEngine,
        model_name: str,
        *,
        kv_gauges: bool,
        clock: Callable[[], float],
    ) -> None:
        self._engine = engine
        self._model_name = model_name
        self._kv_gauges = kv_gauges
        self._clock = clock

    def families(self) -> list[Family]:
        """The families now, as rows."""
        engine = self._engine
        rows: list[Family] = []
        if self._kv_gauges:
            lab = {"model_name": self._model_name}
            usage = engine.kv_usage()
            rows += [Family(name, "gauge", text, [(lab, usage)]) for name, text in _KV_FAMILIES]
        values = engine.dcgm_values(self._clock())
        gpu_name = engine.model.gpu
        gpus = [
            {"gpu": str(i), "device": f"nvidia{i}", "modelName": gpu_name}
            for i in range(engine.model.gpu_count)
        ]
        for name, kind, text in _DCGM_FAMILIES:
            value = values[name]
            rows.append(Family(name, kind, text, [(lab, value) for lab in gpus]))
        return rows

    def collect(self) -> Iterator[Metric]:
        for fam in self.families():
            yield _metric(fam)


def registry(*collectors: Collector) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one) holding `collectors`."""
    reg = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        reg.register(collector)
    return reg
