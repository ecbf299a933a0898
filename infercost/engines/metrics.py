"""One table from the metric names engines and exporters publish to infercost's figures.

Every entry says which canonical figure a source metric feeds, whether it is a gauge (a
reading) or a counter (a running total), and the factor that turns the source's unit into
the canonical unit. Canonical units:

| figure | kind | unit |
|---|---|---|
| gpu_util, sm_active, dram_active, tensor_active | gauge | fraction 0..1 |
| memory_used, memory_free | gauge | bytes |
| power | gauge | W |
| energy | counter | J |
| requests_running, requests_waiting | gauge | requests |
| busy_slots_per_decode | gauge | slots (llama.cpp's mean since start) |
| kv_cache_usage, prefix_cache_hit_rate | gauge | fraction 0..1 |
| kv_cache_tokens | gauge | tokens |
| prefix_cache_hits, prefix_cache_queries | counter | tokens |
| prompt_tokens, generation_tokens | counter | tokens |
| prompt_tokens_cached, prompt_tokens_computed | counter | tokens |
| prompt_seconds, generation_seconds | counter | s |
| decode_calls, requests_succeeded, preemptions | counter | events |

`prompt_tokens` counts every prompt token, cached or not (vLLM, SGLang, TGI).
llama.cpp counts only the tokens it computed (`prompt_tokens_computed`) and the cached
ones apart (`prompt_tokens_cached`), so its total is their sum (summary.py).

The scraper keeps only the metrics in this table, and of their labels only those in
`KNOWN_LABELS` (the ones that tell series apart); anything else an exporter publishes is
dropped before it is stored. Names of unmapped metrics of a known family are still listed,
so a new engine version shows up as a list of names rather than as silently missing
figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["gauge", "counter"]
Family = Literal["vllm", "sglang", "tgi", "llamacpp", "dcgm"]

_MIB: Final = 1024.0 * 1024.0


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one published metric maps to a canonical figure."""

    source: str
    canonical: str
    kind: Kind
    unit: str
    family: Family
    scale: float = 1.0
    #: Lower wins when one endpoint publishes several names for the same figure (a vLLM
    #: that still shows a deprecated name next to its replacement): only one is used.
    priority: int = 0
    note: str = ""
    #: The engine versions that publish this name, where it changed ("<0.9.2", ">=0.9.2");
    #: "" for every version seen. A renamed metric keeps both entries, the new one first.
    versions: str = ""

    @property
    def per_gpu(self) -> bool:
        """Whether the series are per device (DCGM), to be combined per GPU."""
        return self.family == "dcgm"


def _spec(
    source: str,
    canonical: str,
    kind: Kind,
    unit: str,
    family: Family,
    *,
    scale: float = 1.0,
    priority: int = 0,
    note: str = "",
    versions: str = "",
) -> MetricSpec:
    return MetricSpec(source, canonical, kind, unit, family, scale, priority, note, versions)


#: The table. Source names are as exposed; counters that the exposition lists without a
#: `_total` suffix (TGI, DCGM) are found either way (see `lookup`).
METRIC_TABLE: Final[tuple[MetricSpec, ...]] = (
    # vLLM: v0 and v1 engines. v1 renamed gpu_cache_usage_perc to kv_cache_usage_perc and
    # replaced the prefix hit-rate gauge with hit and query counters (in tokens).
    _spec("vllm:num_requests_running", "requests_running", "gauge", "requests", "vllm"),
    _spec("vllm:num_requests_waiting", "requests_waiting", "gauge", "requests", "vllm"),
    _spec("vllm:kv_cache_usage_perc", "kv_cache_usage", "gauge", "fraction", "vllm",
          note="1 means full despite the _perc suffix", versions=">=0.9.2"),
    _spec("vllm:gpu_cache_usage_perc", "kv_cache_usage", "gauge", "fraction", "vllm",
          priority=1, note="renamed kv_cache_usage_perc in 0.9.2, shown beside it until "
          "0.11 hid it; 1 means full despite the _perc suffix", versions="<0.11"),
    _spec("vllm:prefix_cache_hits_total", "prefix_cache_hits", "counter", "tokens", "vllm",
          versions=">=0.9.2"),
    _spec("vllm:gpu_prefix_cache_hits_total", "prefix_cache_hits", "counter", "tokens", "vllm",
          priority=1, note="early v1 name", versions="<0.11"),
    _spec("vllm:prefix_cache_queries_total", "prefix_cache_queries", "counter", "tokens",
          "vllm", versions=">=0.9.2"),
    _spec("vllm:gpu_prefix_cache_queries_total", "prefix_cache_queries", "counter", "tokens",
          "vllm", priority=1, note="early v1 name", versions="<0.11"),
    _spec("vllm:gpu_prefix_cache_hit_rate", "prefix_cache_hit_rate", "gauge", "fraction",
          "vllm", note="v0 engine gauge", versions="v0 engine"),
    _spec("vllm:prompt_tokens_total", "prompt_tokens", "counter", "tokens", "vllm",
          note="all prompt tokens, cached ones included"),
    _spec("vllm:prompt_tokens_cached_total", "prompt_tokens_cached", "counter", "tokens",
          "vllm", note="newer v1: local and external cache hits"),
    _spec("vllm:generation_tokens_total", "generation_tokens", "counter", "tokens", "vllm"),
    _spec("vllm:request_success_total", "requests_succeeded", "counter", "requests", "vllm"),
    _spec("vllm:num_preemptions_total", "preemptions", "counter", "events", "vllm"),
    # SGLang.
    _spec("sglang:num_running_reqs", "requests_running", "gauge", "requests", "sglang"),
    _spec("sglang:num_queue_reqs", "requests_waiting", "gauge", "requests", "sglang"),
    _spec("sglang:token_usage", "kv_cache_usage", "gauge", "fraction", "sglang",
          note="share of the KV token pool in use"),
    _spec("sglang:cache_hit_rate", "prefix_cache_hit_rate", "gauge", "fraction", "sglang"),
    _spec("sglang:prompt_tokens_total", "prompt_tokens", "counter", "tokens", "sglang"),
    _spec("sglang:generation_tokens_total", "generation_tokens", "counter", "tokens", "sglang"),
    _spec("sglang:cached_tokens_total", "prompt_tokens_cached", "counter", "tokens", "sglang",
          note="newer versions split it by a cache_source label"),
    # TGI (the Rust router's exporter: counters without a _total suffix; token counts only
    # as per-request histograms, whose _sum is a running total).
    _spec("tgi_batch_current_size", "requests_running", "gauge", "requests", "tgi"),
    _spec("tgi_queue_size", "requests_waiting", "gauge", "requests", "tgi"),
    _spec("tgi_request_input_length_sum", "prompt_tokens", "counter", "tokens", "tgi",
          note="_sum of the per-request input length histogram"),
    _spec("tgi_request_generated_tokens_sum", "generation_tokens", "counter", "tokens", "tgi",
          note="_sum of the per-request generated tokens histogram"),
    _spec("tgi_request_success", "requests_succeeded", "counter", "requests", "tgi"),
    # llama.cpp's llama-server with --metrics (tools/server, server_task_result_metrics::
    # to_metrics). Values are printed with six significant digits, so a counter past a
    # million moves in steps of ten or more. n_tokens_max is typed counter but is a
    # maximum, and the *_tokens_seconds gauges are the server's own averages: not used.
    _spec("llamacpp:requests_processing", "requests_running", "gauge", "requests", "llamacpp",
          note="busy slots at the scrape"),
    _spec("llamacpp:requests_deferred", "requests_waiting", "gauge", "requests", "llamacpp",
          note="requests waiting for a free slot"),
    _spec("llamacpp:n_busy_slots_per_decode", "busy_slots_per_decode", "gauge", "slots",
          "llamacpp", note="mean since the server started; the window's comes with n_decode"),
    _spec("llamacpp:n_decode_total", "decode_calls", "counter", "events", "llamacpp"),
    _spec("llamacpp:prompt_tokens_total", "prompt_tokens_computed", "counter", "tokens",
          "llamacpp", note="excludes tokens reused from the cache"),
    _spec("llamacpp:prompt_tokens_cached_total", "prompt_tokens_cached", "counter", "tokens",
          "llamacpp", note="since mid-2026 builds"),
    _spec("llamacpp:prompt_seconds_total", "prompt_seconds", "counter", "s", "llamacpp"),
    _spec("llamacpp:tokens_predicted_total", "generation_tokens", "counter", "tokens",
          "llamacpp"),
    _spec("llamacpp:tokens_predicted_seconds_total", "generation_seconds", "counter", "s",
          "llamacpp", note="summed over slots, so it can exceed wall time"),
    _spec("llamacpp:kv_cache_usage_ratio", "kv_cache_usage", "gauge", "fraction", "llamacpp",
          note="removed upstream in May 2025", versions="builds before May 2025"),
    _spec("llamacpp:kv_cache_tokens", "kv_cache_tokens", "gauge", "tokens", "llamacpp",
          note="removed upstream in May 2025", versions="builds before May 2025"),
    # DCGM exporter (default counters plus the profiling ones), one series per GPU.
    _spec("DCGM_FI_DEV_GPU_UTIL", "gpu_util", "gauge", "fraction", "dcgm", scale=0.01,
          note="published in percent"),
    _spec("DCGM_FI_PROF_SM_ACTIVE", "sm_active", "gauge", "fraction", "dcgm"),
    _spec("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", "gauge", "fraction", "dcgm"),
    _spec("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", "gauge", "fraction", "dcgm"),
    _spec("DCGM_FI_DEV_FB_USED", "memory_used", "gauge", "bytes", "dcgm", scale=_MIB,
          note="published in MiB"),
    _spec("DCGM_FI_DEV_FB_FREE", "memory_free", "gauge", "bytes", "dcgm", scale=_MIB,
          note="published in MiB"),
    _spec("DCGM_FI_DEV_POWER_USAGE", "power", "gauge", "W", "dcgm"),
    _spec("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy", "counter", "J", "dcgm",
          scale=1e-3, note="published in mJ since boot"),
)  # fmt: skip

_BY_SOURCE: Final[dict[str, MetricSpec]] = {spec.source: spec for spec in METRIC_TABLE}
if len(_BY_SOURCE) != len(METRIC_TABLE):  # pragma: no cover - a typo in the table above
    raise RuntimeError("METRIC_TABLE lists a source metric twice")

#: Labels kept per family: the ones that tell one series from another (engine, model,
#: GPU, MIG instance, host). Every other label is dropped at scrape time.
KNOWN_LABELS: Final[dict[str, frozenset[str]]] = {
    "vllm": frozenset({"model_name", "engine", "finished_reason"}),
    "sglang": frozenset(
        {"model_name", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank", "engine_type",
         "cache_source"}
    ),
    "tgi": frozenset(),
    "llamacpp": frozenset(),
    "dcgm": frozenset(
        {"gpu", "UUID", "device", "modelName", "Hostname", "hostname", "pci_bus_id",
         "GPU_I_ID", "GPU_I_PROFILE"}
    ),
}  # fmt: skip

#: Name prefixes of the families above, and the family each names: an unmapped name with
#: one of these is worth listing (a metric a new engine version added); any other name is
#: only counted. The engine catalog (infercost/engines/catalog.py) names its engines'
#: families from here.
FAMILY_OF_PREFIX: Final[dict[str, Family]] = {
    "vllm:": "vllm",
    "sglang:": "sglang",
    "tgi_": "tgi",
    "llamacpp:": "llamacpp",
    "DCGM_": "dcgm",
}
FAMILY_PREFIXES: Final = tuple(FAMILY_OF_PREFIX)

#: Canonical figure -> unit, for documentation and API schemas.
CANONICAL_UNITS: Final[dict[str, str]] = {spec.canonical: spec.unit for spec in METRIC_TABLE}

_TOTAL = "_total"


def lookup(name: str) -> MetricSpec | None:
    """The table entry for a sample name, or None when infercost does not know it.

    The Prometheus text parser adds `_total` to counter samples that were exposed without
    it (`tgi_request_success` comes back as `tgi_request_success_total`), so a name is
    also tried without that suffix.
    """
    spec = _BY_SOURCE.get(name)
    if spec is None and name.endswith(_TOTAL):
        spec = _BY_SOURCE.get(name[: -len(_TOTAL)])
    return spec
