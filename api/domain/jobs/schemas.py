"""Request and response shapes for jobs, runs and raw samples (CONTRACT.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from api.domain.history.schemas import Change
from infercost.limits import MAX_RATE, MAX_TOKENS, MIN_RATE
from infercost.prices.pricing import PriceSource
from infercost.sharding import MAX_SHARDS
from infercost.sweep import MAX_LEVELS

TokenCount = Annotated[float, msgspec.Meta(gt=0, le=MAX_TOKENS)]
SloLimit = Annotated[float, msgspec.Meta(gt=0)]


class Lengths(msgspec.Struct, forbid_unknown_fields=True):
    """A token-length distribution, drawn per request, rounded and clipped to [min, max]
    (never below 1).

    `normal` (the default): `mean` and optional `std` (0 or absent: every length is the
    mean). `uniform`: every whole number from `min` to `max` equally likely (both required,
    no mean or std). `lognormal`: `mean` and `std` (> 0) of the lengths themselves, not of
    their logarithms: a long right tail, as real prompt and answer lengths have.
    """

    distribution: Literal["normal", "uniform", "lognormal"] = "normal"
    mean: TokenCount | None = None
    std: Annotated[float, msgspec.Meta(ge=0, le=1_000_000)] | None = None
    min: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] | None = None
    max: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] | None = None

    def __post_init__(self) -> None:
        # Raised here, msgspec reports it at this object's path (a 400 naming the field).
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        if self.distribution == "uniform":
            if self.min is None or self.max is None:
                raise ValueError(
                    "a uniform distribution needs min and max (every whole number between "
                    "them is equally likely)"
                )
            if self.mean is not None or self.std is not None:
                raise ValueError(
                    "a uniform distribution takes min and max only: leave out mean and std "
                    "(its mean is (min + max) / 2)"
                )
            return
        if self.mean is None:
            raise ValueError(f"a {self.distribution} distribution needs mean")
        if self.distribution == "lognormal" and not self.std:
            raise ValueError(
                "a lognormal distribution needs std > 0 (the spread of the lengths); "
                "for a fixed length give mean alone"
            )


class Sessions(msgspec.Struct, forbid_unknown_fields=True):
    """Multi-turn conversations (README, "Multi-turn sessions"): each closed-loop user
    replays a conversation of `turns` turns; every turn sends the whole history (earlier
    user messages and the model's actual answers) plus a new user message. Every
    conversation starts with the same system prompt of about `system_prompt_tokens`
    tokens, so an engine's prefix cache can reuse it."""

    turns: Annotated[int, msgspec.Meta(ge=1, le=64)]
    system_prompt_tokens: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 0


class Workload(msgspec.Struct, forbid_unknown_fields=True):
    """What each request asks for: prompt and output lengths, sampling, streaming.

    Synthetic prompts need `input_tokens` and `output_tokens`. With `dataset_id` the prompts
    come from that dataset (POST /v1/datasets), sent in an order the seed shuffles, cycling;
    each item's own max_tokens sets its output length, else `output_tokens` does.
    `sessions` makes each closed-loop user hold a multi-turn conversation (with a dataset,
    its conversations are replayed turn by turn; without one, `input_tokens` is the length
    of each new user message).
    """

    input_tokens: Lengths | None = None
    output_tokens: Lengths | None = None
    dataset_id: uuid.UUID | None = None
    # A workload preset (GET /v1/presets): its lengths fill input_tokens and output_tokens
    # left out, and its SLO applies when the job gives none.
    preset: str | None = None
    sessions: Sessions | None = None
    ignore_eos: bool = True
    stream: bool = True
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    seed: int = 0


class Load(msgspec.Struct, forbid_unknown_fields=True):
    """The load plan: levels, how long each lasts, and warm-up.

    `mode` "concurrency" is a closed loop: each level is a number of users (a whole number),
    each sending its next request when the previous one ends. "rate" is an open loop: each
    level is requests per second, sent at the times an `arrival` process schedules whatever
    the server does; `burstiness` is the gamma shape k (inter-arrival coefficient of variation
    1/sqrt(k); k = 1 is Poisson). A level sends `requests_per_level` requests (100 when
    neither is given) or runs for `duration_s` seconds: a rate level schedules its requests
    over duration_s, concurrency users start no new request after it. The first
    `warmup_requests` of each level, or (instead) every request sent in its first
    `warmup_s` seconds, are stored but left out of every figure; with warmup_s the
    measured part (requests_per_level or duration_s) comes after those seconds.
    `cooldown_s` pauses that long after each level before the next one starts.

    "sweep" chooses its own levels (give no `levels`): one synchronous level (1 user), one
    throughput level (`max_concurrency` users, default 64, at most the server's limit), then
    `rate_levels` (default 5) request rates evenly spaced strictly between the two levels'
    measured requests/s, sent by the `arrival` process (constant unless given). With an
    `slo` it stops after two consecutive rate levels fail it; any level whose error rate is
    above `max_error_rate` (default 0.05) stops it too. The job's `sweep` block says what
    was chosen and why it stopped.
    """

    mode: Literal["concurrency", "rate", "sweep"]
    # Required for concurrency and rate, never given for a sweep.
    levels: (
        Annotated[
            # Users, or requests/s: at least MIN_RATE (a slower rate's schedule overflows).
            list[Annotated[float, msgspec.Meta(ge=MIN_RATE, le=MAX_RATE)]],
            msgspec.Meta(min_length=1, max_length=MAX_LEVELS),
        ]
        | None
    ) = None
    requests_per_level: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    duration_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None = None
    warmup_requests: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 0
    warmup_s: Annotated[float, msgspec.Meta(gt=0, le=3_600)] | None = None
    cooldown_s: Annotated[float, msgspec.Meta(ge=0, le=3_600)] = 0.0
    # Unset: poisson, or constant for a sweep (stored resolved).
    arrival: Literal["constant", "poisson", "gamma"] | None = None
    burstiness: Annotated[float, msgspec.Meta(gt=0, le=1000)] = 1.0
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 300.0
    # How often the endpoint's metrics_urls are scraped during each level.
    telemetry_interval_s: Annotated[float, msgspec.Meta(ge=0.1, le=60)] = 1.0
    # Sweep only; stored resolved (5, min(64, the server's limit), 0.05) for a sweep.
    # A sweep also measures its synchronous and throughput levels.
    rate_levels: Annotated[int, msgspec.Meta(ge=1, le=MAX_LEVELS - 2)] | None = None
    max_concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_error_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    # Worker processes that run each level together, starting at one agreed instant; their
    # samples merge into one run (README, "Shards"). A concurrency level needs >= shards users.
    shards: Annotated[int, msgspec.Meta(ge=1, le=MAX_SHARDS)] = 1


class SloLimits(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Limits on one figure at chosen statistics (ms), e.g. {"p95": 500}."""

    mean: SloLimit | None = None
    p50: SloLimit | None = None
    p90: SloLimit | None = None
    p95: SloLimit | None = None
    p99: SloLimit | None = None
    p999: SloLimit | None = None
    max: SloLimit | None = None


class Slo(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Service-level objective: a request meets it when its own TTFT, TPOT and E2E are within
    the loosest limit given for each; a run passes when every stated statistic holds."""

    ttft_ms: SloLimits | None = None
    tpot_ms: SloLimits | None = None
    itl_ms: SloLimits | None = None
    e2e_ms: SloLimits | None = None


class JobCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/jobs. `force`: submit even though the endpoint's last preflight check
    failed (otherwise 409 with the check's reason); not stored with the job."""

    endpoint_id: uuid.UUID
    workload: Workload
    load: Load
    slo: Slo | None = None
    force: bool = False


class Progress(msgspec.Struct):
    """Requests done out of all requests the job will send (warm-up included).

    A level of fixed duration counts rate x duration_s until it starts (then its schedule's
    exact count); a concurrency level of fixed duration counts the requests done so far until
    it ends. When a job succeeds, done equals total.
    """

    done: int
    total: int


class Distribution(msgspec.Struct):
    """count, mean, std, min, percentiles (linear interpolation) and max."""

    count: int
    mean: float | None
    std: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    max: float | None


class PromptTokenizer(msgspec.Struct):
    """How a level's synthetic prompts were built to their drawn lengths, said as it starts.

    `form`: the endpoint's tokenizer request that counted them (e.g. "llamacpp:/tokenize
    content", "vllm:/tokenize messages"), null when none answered consistently. `exact`:
    whether prompts could be built to exactly the token count the server reports.
    `template_tokens`: the chat template's tokens, measured from the server's usage where
    the form counts raw text only. `note`: what that means, in a sentence.
    """

    form: str | None
    exact: bool
    template_tokens: int | None
    note: str


class RequestCounts(msgspec.Struct):
    """Measured requests (warm-up excluded) and failures by error class."""

    total: int
    succeeded: int
    failed: int
    errors: dict[str, int]


class Telemetry(msgspec.Struct):
    """GPU and engine figures over the measured window, from the endpoint's metrics_urls
    (METRICS.md, Telemetry); null where not scraped or not published.

    Fractions 0..1: utilisation, SM/DRAM/tensor activity, KV-cache usage, prefix-cache hit
    rate; power in W, energy in J, memory in bytes. Gauges are averaged over time; counters
    (tokens, preemptions, cache hits) are differences over the window. `errors` lists
    every scrape that failed and why; the run goes on regardless. `sources` names the
    metric families seen (vllm, sglang, tgi, llamacpp, dcgm); `unmapped` the names of a
    known family published but not mapped (their values are not stored). Token rates and
    cached prompt tokens come from the engine's counters over the window; `notes` says
    when requests queued in front of the engine.
    """

    gpu_util_mean: float | None = None
    gpu_util_p95: float | None = None
    sm_active_mean: float | None = None
    power_w_mean: float | None = None
    energy_j_per_output_token: float | None = None
    kv_cache_usage_mean: float | None = None
    kv_cache_usage_max: float | None = None
    requests_running_mean: float | None = None
    requests_waiting_max: float | None = None
    prefix_cache_hit_rate: float | None = None
    errors: list[str] = []
    requests_running_max: float | None = None
    requests_waiting_mean: float | None = None
    memory_used_bytes_mean: float | None = None
    dram_active_mean: float | None = None
    tensor_active_mean: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prompt_tokens_cached: float | None = None
    prompt_tokens_computed: float | None = None
    prompt_tokens_cached_share: float | None = None
    prompt_seconds: float | None = None
    generation_seconds: float | None = None
    busy_slots_per_decode: float | None = None
    kv_cache_tokens_mean: float | None = None
    notes: list[str] = []
    gpu_count: int | None = None
    per_gpu: dict[str, float] = {}
    sources: list[str] = []
    unmapped: list[str] = []
    samples: int = 0


class Cost(msgspec.Struct):
    """Price and cost per unit; `reason` explains any null.

    `price_source` says where `usd_per_hour` came from: `run` (the snapshot stored when the
    run was measured), `endpoint` (its usd_per_hour), `price_book` (the entry in effect at
    `priced_at` x gpu_count) or `explicit` (the query's usd_per_hour). `priced_at` is the
    time whose price was used; null for an explicit price or when none was found.
    """

    usd_per_hour: float | None
    per_million_output_tokens_usd: float | None
    per_million_total_tokens_usd: float | None
    per_thousand_requests_usd: float | None
    at_slo_per_million_output_tokens_usd: float | None
    reason: str | None = None
    priced_at: datetime | None = None
    price_source: PriceSource | None = None
    pricing: Literal["per_hour", "per_token"] = "per_hour"
    input_usd_per_million_tokens: float | None = None
    output_usd_per_million_tokens: float | None = None
    blended_usd_per_million_tokens: float | None = None


class ShardHealth(msgspec.Struct):
    """One shard of a sharded level: its worker process, requests sent, CPU use, and how
    far its first send was from the earliest shard's (`start_offset_ms`, one clock)."""

    shard: int
    worker: str | None
    requests: int
    cpu_util: float | None
    start_offset_ms: float | None
    # How late the shard woke for the agreed instant, and sent against the level's schedule
    # (t_send - t_sched over its requests).
    start_lag_ms: float | None = None
    send_late_p50_ms: float | None = None
    send_late_p99_ms: float | None = None
    send_late_max_ms: float | None = None


class ClientHealth(msgspec.Struct):
    """Whether the load generator, not the server, set the pace.

    `concurrency_held` applies to concurrency levels; `send_rate` (measured sends per second)
    and `rate_held` to rate levels (METRICS.md, client health). Null where they do not apply.
    """

    queue_delay_p99_ms: float | None
    cpu_util: float | None
    inflight_mean: float | None
    concurrency_held: bool | None
    send_rate: float | None = None
    rate_held: bool | None = None
    # With load.shards > 1: cpu_util is the busiest shard's, and each shard is listed.
    shards: list[ShardHealth] | None = None
    # The reading side (workers/loadgen/health.py): age of response bytes when parsed, how
    # long a ready callback waited for the event loop, the busiest second's CPU share, and
    # requests re-sent after a kept-alive connection turned out closed. Null for sharded
    # levels and runs stored before these were measured.
    read_lag_p50_ms: float | None = None
    read_lag_p99_ms: float | None = None
    read_lag_max_ms: float | None = None
    loop_lag_p50_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    cpu_util_peak: float | None = None
    resent: int | None = None
    # Figures the client's own lateness spoils: requests_per_s and output_tokens_per_s when
    # it sent late, ttft_ms, itl_ms, tpot_ms and e2e_ms when it read late.
    spoils: list[str] | None = None


class Efficiency(msgspec.Struct):
    """A run against the roofline bounds of its hardware and model (METRICS.md, Physical
    limits), present when the endpoint gives hardware and params_b.

    Bounds in tokens/s: one stream's decode speed; output throughput at the run's own mean
    concurrency and context; output throughput no batch can beat. Fractions: `decode` =
    median per-user speed / decode bound, `throughput` = output tokens/s / bound at the
    run's concurrency, `peak` = output tokens/s / peak bound.
    """

    decode_bound_tokens_per_s: float
    throughput_bound_tokens_per_s: float | None
    peak_throughput_bound_tokens_per_s: float
    decode: float | None
    throughput: float | None
    peak: float | None


class LiveFigures(msgspec.Struct):
    """A running level's figures so far, rewritten by the worker about twice a second and
    gone once the level ends (its summary then holds the final figures), for progress bars.

    `done` and `planned` count the level's requests, warm-up included (`planned` null while
    unknown: a concurrency level of fixed duration); `errors` the failed ones so far;
    `elapsed_s` the time since the level started. `ttft_ms_p50` and `output_tokens_per_s`
    are over the measured requests finished so far, defined as in the summary. A sharded
    level (load.shards > 1) reports only `done`, `planned` and `elapsed_s` while it runs:
    its `errors` and figures are null until its shards' samples are merged.
    """

    done: int
    planned: int | None
    errors: int | None
    elapsed_s: float
    ttft_ms_p50: float | None
    output_tokens_per_s: float | None


class Definitions(msgspec.Struct):
    """A run's figures recomputed from its raw samples as another tool defines them
    (`?definitions=vllm|guidellm|aiperf`; README, "Other tools' definitions").

    `tpot_ms` and `itl_ms` are the tool's figures of those names (`metric_names` gives the
    tool's own name), with its percentile method; `reported_stats` lists the statistics
    the tool itself prints. `differences` says in sentences how each differs from
    infercost's definition, `sources` where the definitions were read.
    """

    tool: str
    tpot_ms: Distribution
    itl_ms: Distribution
    output_tokens_per_s: float | None
    requests_per_s: float | None
    duration_s: float | None
    metric_names: dict[str, str]
    reported_stats: list[str]
    differences: list[str]
    sources: list[str]


class RunSummary(msgspec.Struct):
    """One load level's figures over its measured window (METRICS.md)."""

    id: uuid.UUID
    job_id: uuid.UUID
    level: float
    mode: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    requests: RequestCounts
    duration_s: float | None
    # usage, tokenizer or events (or mixed): where n_out came from (METRICS.md).
    count_source: str | None
    # exact, approximate or mixed: whether prompts had exactly their drawn token count.
    prompt_lengths: str | None
    ttft_ms: Distribution
    # Time to first visible content (reasoning excluded); equals ttft_ms without reasoning.
    ttfo_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    queue_delay_ms: Distribution
    per_user_tokens_per_s: Distribution
    output_tokens_per_s: float | None
    input_tokens_per_s: float | None
    total_tokens_per_s: float | None
    requests_per_s: float | None
    mean_concurrency: float | None
    error_rate: float | None
    goodput_rps: float | None
    slo_attainment: float | None
    slo_passed: bool | None
    client_bound: bool | None
    client: ClientHealth | None
    telemetry: Telemetry
    cost: Cost
    efficiency: Efficiency | None = None
    # Which tokenizer form built the level's prompts, or that none worked (then
    # prompt_lengths is approximate); null for dataset and session prompts.
    prompt_tokenizer: PromptTokenizer | None = None
    # Equal on runs that sent the same kind of requests (README, "Workload fingerprints").
    workload_fingerprint: str | None = None
    # While the level runs: its figures so far (null once it ends).
    live: LiveFigures | None = None
    # Against the previous comparable run (README, "History and regressions"): decided when
    # the job ends; null before that, for failed runs and runs measured before history.
    change: Change | None = None
    # Only with ?definitions=: the figures under that tool's definitions.
    definitions: Definitions | None = None
    # Why a failed level failed when its requests cannot say (its worker died mid-level,
    # its samples could not be stored); null otherwise.
    error: str | None = None


class CapacityAtSlo(msgspec.Struct, omit_defaults=False):
    """The highest load that meets the job's SLO (METRICS.md, cost at SLO).

    Interpolated between the last passing and the first failing level (`between`) when both
    were measured; `lower_bound` when every level passed (the true capacity is higher).
    `reason` says why there is none.
    """

    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    level: float | None = None
    interpolated: bool | None = None
    between: list[float] | None = None
    lower_bound: bool | None = None
    client_bound: bool | None = None
    run_ids: list[uuid.UUID] = []
    usd_per_hour: float | None = None
    per_million_output_tokens_usd: float | None = None
    reason: str | None = None


class SweepLevel(msgspec.Struct):
    """One level a sweep chose: `kind` synchronous, throughput or rate; `mode` and `level`
    as its run has them (users for concurrency, requests/s for rate); `why` it was chosen.
    The figures the sweep decided on (requests/s, error rate, SLO verdict) and its run are
    null while it runs."""

    index: int
    kind: Literal["synchronous", "throughput", "rate"]
    mode: Literal["concurrency", "rate"]
    level: float
    why: str
    run_id: uuid.UUID | None = None
    requests_per_s: float | None = None
    error_rate: float | None = None
    slo_passed: bool | None = None


class Sweep(msgspec.Struct):
    """What a sweep (load.mode "sweep") measured and why it stopped.

    `planned_levels` = 2 + load.rate_levels. `stopped` is null while it runs, then
    `completed` (every planned level), `slo_failed_twice` (two rate levels in a row failed
    the SLO), `error_rate` (a level's error rate above load.max_error_rate),
    `no_rate_range` (the throughput level served no more requests/s than the synchronous
    one), `cancelled` or `failed`; `detail` says it in a sentence.
    """

    planned_levels: int
    levels: list[SweepLevel]
    stopped: (
        Literal[
            "completed", "slo_failed_twice", "error_rate", "no_rate_range", "cancelled", "failed"
        ]
        | None
    ) = None
    detail: str | None = None


class JobListItem(msgspec.Struct):
    """A job in a listing: its load plan (mode, levels) but not its runs; read the job for
    them."""

    id: uuid.UUID
    endpoint_id: uuid.UUID
    status: str
    progress: Progress
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    load: dict[str, Any]


class JobRead(JobListItem):
    """A job, its configuration, its progress and its runs so far."""

    workload: dict[str, Any]
    slo: dict[str, Any] | None
    runs: list[RunSummary]
    capacity_at_slo: CapacityAtSlo | None = None
    # What its runs' workload_fingerprint is (README, "Workload fingerprints").
    workload_fingerprint: str | None = None
    # Sweeps only (load.mode "sweep"): the levels chosen and why it stopped.
    sweep: Sweep | None = None


class Sample(msgspec.Struct):
    """One request's raw timings: t_sched and t_send in seconds from the run's start."""

    seq: int
    warmup: bool
    t_sched: float
    t_send: float
    ttfb_ms: float | None
    ttft_ms: float | None
    e2e_ms: float | None
    n_in: int | None
    n_out: int
    count_source: str
    status: int | None
    error_class: str | None
    error: str | None
    chunk_times_ms: list[float]
    # Time to the first visible content, reasoning excluded (= ttft_ms without reasoning).
    ttfo_ms: float | None = None
    # Tokens each content event carried, when the server said (continuous usage).
    chunk_tokens: list[int] | None = None
    # The drawn prompt length, and "exact" when the prompt had exactly that many tokens
    # (checked with the endpoint's tokenizer route) or "approximate".
    n_in_target: int | None = None
    prompt_length: str | None = None


class SamplePage(msgspec.Struct):
    """A page of samples; pass `next_after` as `after` for the next page (null at the end)."""

    items: list[Sample]
    next_after: int | None


#: Columns of the CSV export, in order (CONTRACT.md, Raw samples).
CSV_COLUMNS = (
    "seq",
    "warmup",
    "t_sched",
    "t_send",
    "ttfb_ms",
    "ttft_ms",
    "e2e_ms",
    "n_in",
    "n_out",
    "count_source",
    "status",
    "error_class",
    "ttfo_ms",
    "n_in_target",
    "prompt_length",
)
