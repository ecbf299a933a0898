"""Benchmark jobs, their runs (one per load level) and every request's raw timings."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey
from infercost.figures.cost import (
    RUN_PER_MILLION_OUTPUT_TOKENS_SQL,
    RUN_PER_MILLION_TOTAL_TOKENS_SQL,
)

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
#: 'interrupted': its worker died mid-level; the level was measured again in another run
#: (which names it in replaces_run_id). Never evidence: every figure reads the other run.
RUN_STATUSES = ("running", "succeeded", "failed", "cancelled", "interrupted")
#: runs.change_verdict (infercost.history: a run against its baseline; null: not decided).
CHANGE_VERDICTS = (
    "regression",
    "improvement",
    "no_change",
    "insufficient_data",
    "baseline",
    "incomparable",
)


#: The columns GET /v1/comparisons reads besides the index's keys (infercost/comparisons).
COMPARISON_INCLUDE = (
    "id", "job_id", "endpoint_id", "level", "mode", "workload_fingerprint", "client_bound",
    "slo_passed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms",
    "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50",
    "output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s",
    "mean_concurrency", "error_rate", "goodput_rps", "slo_attainment", "gpu_util_mean",
    "cost_per_million_output_tokens_usd", "cost_per_million_total_tokens_usd",
)  # fmt: skip


def _figure(block: str, key: str) -> Computed:
    """A number inside a JSONB summary, materialised as a column comparisons can read."""
    return Computed(f"({block} ->> '{key}')::double precision", persisted=True)


class Job(UUIDPrimaryKey, CreatedAt, Base):
    """One endpoint x workload x load plan; its state lives here, Redis only nudges."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(f"status IN {JOB_STATUSES}", name="status"),
        Index("uq_jobs_team_idempotency_key", "team_id", "idempotency_key", unique=True),
        Index("ix_jobs_team_created", "team_id", "created_at"),
        # The maintenance sweep looks for queued jobs to re-publish and running jobs whose
        # heartbeat stopped: only the few unfinished jobs are in this index.
        Index(
            "ix_jobs_unfinished",
            "status",
            "heartbeat_at",
            postgresql_where=text("status IN ('queued', 'running')"),
        ),
        # The status board's job summary (infercost.status.models) rebuilds an endpoint and
        # workload's finished scheduled jobs from this when one of them changes.
        Index(
            "ix_jobs_scheduled_outcomes",
            "team_id",
            "endpoint_id",
            "workload_fingerprint",
            "created_at",
            postgresql_where=text("schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')"),
        ),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    endpoint_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("endpoints.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    # The submitted configuration, as validated: free-form by nature, replayed by the worker.
    workload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    load: Mapped[dict[str, Any]] = mapped_column(JSONB)
    slo: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    progress_done: Mapped[int] = mapped_column(default=0)
    progress_total: Mapped[int]
    error: Mapped[str | None] = mapped_column(Text)
    # When the job's task was last handed to the broker, and how often it was: a job queued
    # long after that lost its message (a flushed broker) and is handed over again.
    enqueued_at: Mapped[datetime | None]
    enqueue_count: Mapped[int] = mapped_column(default=0, server_default="0")
    # The broker priority its message went with (infercost.jobs.outbox: its place in its
    # team's line, 0 first; the best of its messages): where it waits in the shared queue.
    queue_priority: Mapped[int | None] = mapped_column(SmallInteger)
    # The fencing token of the lease on a running job: each claim increments it, and every
    # write the runner makes carries it, so a runner that lost the job writes nothing more.
    lease_token: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    started_at: Mapped[datetime | None]
    # Written by the worker about twice a second while it runs the job; a running job whose
    # heartbeat stopped lost its worker, and the sweep hands it to another (the second time
    # fails it with a message). Null while a handed-over job waits for a worker.
    heartbeat_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # A sweep's report (load.mode "sweep"): the levels it chose and why, and why it stopped
    # (api/domain/jobs/schemas.py Sweep); written by the worker as it goes, null otherwise.
    sweep: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The dataset the workload replays (workload.dataset_id), as a real column so a delete
    # can tell whether jobs used it.
    dataset_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("datasets.id"), index=True)
    # infercost.workload.fingerprint.workload_fingerprint of the workload; each run copies it.
    workload_fingerprint: Mapped[str | None] = mapped_column(String(16))
    # The schedule that submitted the job (infercost.schedules), null for a job a user sent.
    schedule_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("schedules.id", ondelete="SET NULL"), index=True
    )
    # A job whose runs were imported from another tool's result file (POST /v1/imports):
    # it never ran here, and its runs say which tool measured them (runs.source).
    imported: Mapped[bool] = mapped_column(default=False, server_default=text("false"))
    # How often a worker died under it (infercost.jobs.repository.JobRepository.interrupt):
    # the first time its level is measured again, the second fails the job.
    interruptions: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")


class Run(UUIDPrimaryKey, CreatedAt, Base):
    """One load level of a job: configuration, measured window and summary figures."""

    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(f"status IN {RUN_STATUSES}", name="status"),
        # One run a level, besides runs interrupted by their worker's death.
        Index(
            "uq_runs_job_index",
            "job_id",
            "level_index",
            unique=True,
            postgresql_where=text("status <> 'interrupted'"),
        ),
        # GET /v1/comparisons: a team's finished runs by deployment, in time order, with
        # every column a comparison reads, so it scans this narrow index only (an index-only
        # scan) and never the wide rows with their JSONB summaries.
        Index(
            "ix_runs_comparisons",
            "team_id",
            "deployment_id",
            "finished_at",
            postgresql_where=text("status = 'succeeded'"),
            postgresql_include=list(COMPARISON_INCLUDE),
        ),
        CheckConstraint(f"change_verdict IN {CHANGE_VERDICTS}", name="change_verdict"),
        # GET /v1/endpoints/{id}/history reads an endpoint's series (workload, mode, level)
        # in time order, and a finishing job looks up each run's baseline: both walk this.
        Index(
            "ix_runs_history",
            "team_id",
            "endpoint_id",
            "workload_fingerprint",
            "mode",
            "level",
            "finished_at",
            postgresql_where=text("status = 'succeeded'"),
        ),
        # Deleting a run sets its successors' baseline_run_id to null; this finds them.
        Index(
            "ix_runs_baseline_run_id",
            "baseline_run_id",
            postgresql_where=text("baseline_run_id IS NOT NULL"),
        ),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    endpoint_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("endpoints.id"), index=True)
    # What the endpoint described as the run started (infercost.jobs.deployments): later
    # changes to the endpoint do not move the run to another deployment.
    deployment_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("deployments.id"))
    # The engine's version as the run started, so history shows which release measured it.
    engine_version: Mapped[str | None] = mapped_column(String(64))
    level_index: Mapped[int] = mapped_column(SmallInteger)
    level: Mapped[float]
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="running")
    # Why a level failed when no request can say it (its worker died, its samples could
    # not be stored); null otherwise.
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # Price snapshot at measurement time, so a run can be re-priced later without losing this.
    usd_per_hour: Mapped[float | None]
    price_note: Mapped[str | None] = mapped_column(Text)
    # A hosted API's per-token prices as the run started (then usd_per_hour is null).
    usd_per_million_input_tokens: Mapped[float | None]
    usd_per_million_output_tokens: Mapped[float | None]
    # Scalar figures are columns (they are filtered and sorted); distributions are JSONB.
    requests_total: Mapped[int] = mapped_column(default=0)
    requests_succeeded: Mapped[int] = mapped_column(default=0)
    requests_failed: Mapped[int] = mapped_column(default=0)
    duration_s: Mapped[float | None]
    count_source: Mapped[str | None] = mapped_column(String(16))
    # "exact" (every measured prompt checked with the endpoint's tokenizer), "approximate"
    # or "mixed"; null for runs measured before prompts said.
    prompt_lengths: Mapped[str | None] = mapped_column(String(16))
    output_tokens_per_s: Mapped[float | None]
    input_tokens_per_s: Mapped[float | None]
    total_tokens_per_s: Mapped[float | None]
    requests_per_s: Mapped[float | None]
    mean_concurrency: Mapped[float | None]
    error_rate: Mapped[float | None]
    goodput_rps: Mapped[float | None]
    goodput_output_tokens_per_s: Mapped[float | None]
    slo_attainment: Mapped[float | None]
    slo_passed: Mapped[bool | None]
    client_bound: Mapped[bool | None]
    # Percentile columns: each a statistic of a distribution in `stats`, written with it
    # by JobRepository.update_run (infercost.figures.metrics.percentile_columns), all nine alike.
    ttft_p50_ms: Mapped[float | None]
    ttft_p95_ms: Mapped[float | None]
    tpot_p50_ms: Mapped[float | None]
    tpot_p95_ms: Mapped[float | None]
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The telemetry summary over the measured window, with scrape errors (docs/cli-and-api.md).
    telemetry: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The engine's own per-request timings summarised beside the client's, and prompt tokens
    # served from its prefix cache (infercost.figures.metrics); null where the engine reported none.
    server_timings: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    cache: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Whether the level's evidence supports its figures: {"ok", "reasons"} (metrics.py).
    adequacy: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # A level with a cap on requests in flight (load.max_concurrency): whether it was
    # reached and how often requests waited for a slot (metrics.concurrency_cap_block).
    concurrency_cap: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # A trace replay's run (load.mode "trace"): replay fidelity, what time_scale compressed
    # and each interval of trace time with its SLO attainment (infercost.figures.replay).
    replay: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The figures so far of a level being measured (workers/live.py), written by the
    # worker's heartbeat for progress bars; null once the level ends and its summary stands.
    live: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # What makes runs comparable (infercost.workload.fingerprint): equal fingerprints, same
    # workload.
    workload_fingerprint: Mapped[str | None] = mapped_column(String(16), index=True)
    # Figures kept inside `stats` and `telemetry` as columns, so comparisons sort and
    # aggregate them without reading any JSONB (or samples): the rest of the percentile
    # columns (written from `stats` like those above), and, generated by the database, the
    # mean GPU utilisation and the cost at the run's own price snapshot (infercost.figures.cost).
    itl_p50_ms: Mapped[float | None]
    itl_p95_ms: Mapped[float | None]
    e2e_p50_ms: Mapped[float | None]
    e2e_p95_ms: Mapped[float | None]
    per_user_tokens_per_s_p50: Mapped[float | None]
    gpu_util_mean: Mapped[float | None] = mapped_column(_figure("telemetry", "gpu_util_mean"))
    cost_per_million_output_tokens_usd: Mapped[float | None] = mapped_column(
        Computed(RUN_PER_MILLION_OUTPUT_TOKENS_SQL, persisted=True)
    )
    cost_per_million_total_tokens_usd: Mapped[float | None] = mapped_column(
        Computed(RUN_PER_MILLION_TOTAL_TOKENS_SQL, persisted=True)
    )
    # History (infercost.history): this run against its baseline, the latest earlier
    # succeeded run of the same endpoint, workload fingerprint, mode and level, decided when
    # the job ended. `change` holds each metric's test (free-form detail, read whole);
    # `change_verdict` is a column because history and webhooks filter on it.
    baseline_run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL")
    )
    change_verdict: Mapped[str | None] = mapped_column(String(20))
    change: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Null for infercost's own runs; for a run imported from another tool's file
    # (infercost.imports): the tool, its version, the file's format and whose definitions
    # its figures follow (free-form detail, read whole). `source_tool` is that tool's name
    # as a column, so comparisons label rows without reading JSONB.
    source: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    source_tool: Mapped[str | None] = mapped_column(String(16))
    # Retention (INFERCOST_SAMPLE_RETENTION_DAYS): when the maintenance process deleted the
    # run's raw request and telemetry samples; its summary (every column above) stays.
    samples_pruned_at: Mapped[datetime | None]
    # Reasoning models: reasoning and answer tokens per second are columns (comparisons sort
    # by what a user reads); the per-request detail is the `reasoning` block.
    reasoning_tokens_per_s: Mapped[float | None]
    answer_tokens_per_s: Mapped[float | None]
    reasoning: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Several models on one endpoint (workload.models): each model's figures, a list of
    # blocks (infercost.figures.metrics.models_block); null for one model.
    models: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # Tool calls and structured answers judged (workload.features tools, structured): the
    # valid shares are columns (compared across engines and loads), the detail JSONB.
    tool_calls_valid_share: Mapped[float | None]
    structured_valid_share: Mapped[float | None]
    tools: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    structured: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # Requests with images (workload.features image): images, their tokens, TTFT.
    image: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The run of the same level that its worker's death interrupted, which this one
    # measured again; null for a level measured once.
    replaces_run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL")
    )


class RunModelFigures(Base):
    """One model's figures in a run spread over several (workload.models), one row a model:
    the run's `models` block as columns (infercost.figures.metrics.model_columns), written
    with it by JobRepository.update_run, so comparisons and history can group by the model a
    request asked for without reading JSONB."""

    __tablename__ = "run_models"

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(String(256), primary_key=True)
    requests_total: Mapped[int]
    requests_succeeded: Mapped[int]
    error_rate: Mapped[float | None]
    ttft_p50_ms: Mapped[float | None]
    ttft_p95_ms: Mapped[float | None]
    tpot_p50_ms: Mapped[float | None]
    tpot_p95_ms: Mapped[float | None]
    e2e_p50_ms: Mapped[float | None]
    e2e_p95_ms: Mapped[float | None]
    output_tokens_per_s: Mapped[float | None]
    input_tokens_per_s: Mapped[float | None]
    requests_per_s: Mapped[float | None]
    # Its input and output tokens in the run's window / all of them: its part of the cost.
    token_share: Mapped[float | None]


class RequestSample(Base):
    """One request's raw timings, written in bulk with COPY; times are seconds from run start."""

    __tablename__ = "request_samples"

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    warmup: Mapped[bool]
    t_sched: Mapped[float] = mapped_column(Float)
    t_send: Mapped[float] = mapped_column(Float)
    ttfb_ms: Mapped[float | None]
    ttft_ms: Mapped[float | None]
    tpot_ms: Mapped[float | None]
    e2e_ms: Mapped[float | None]
    n_in: Mapped[int | None]
    n_out: Mapped[int] = mapped_column(default=0)
    count_source: Mapped[str] = mapped_column(String(16))
    status: Mapped[int | None] = mapped_column(SmallInteger)
    error_class: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    chunk_times_ms: Mapped[list[float]] = mapped_column(ARRAY(Float))
    # Time to the first visible content (reasoning text excluded), ms from t_send.
    ttfo_ms: Mapped[float | None]
    # Tokens each content event carried (continuous usage), parallel to chunk_times_ms;
    # null when the server did not say (one token per event is then assumed).
    chunk_tokens: Mapped[list[int] | None] = mapped_column(ARRAY(Integer))
    # The drawn prompt length, and whether the prompt had exactly that many tokens.
    n_in_target: Mapped[int | None]
    prompt_length: Mapped[str | None] = mapped_column(String(16))
    # Prompt tokens served from the server's prefix cache, as it reported them.
    cached_tokens: Mapped[int | None]
    # The engine's own timings of the request (infercost.figures.metrics.ServerTimings), where it
    # reports them: "llamacpp" (its `timings` object) or "tgi" (its response headers).
    server_source: Mapped[str | None] = mapped_column(String(16))
    server_prefill_ms: Mapped[float | None]
    server_tpot_ms: Mapped[float | None]
    server_queue_ms: Mapped[float | None]
    server_n_out: Mapped[int | None]
    server_n_prefilled: Mapped[int | None]
    # How long it waited for a slot under the level's load.max_concurrency (part of its
    # queue delay, asked for by the plan); null without a cap.
    cap_wait_ms: Mapped[float | None]
    # Reasoning tokens of the answer and the time to its first reasoning event (ms from
    # t_send); null when it showed no reasoning.
    n_reasoning: Mapped[int | None]
    ttfr_ms: Mapped[float | None]
    reasoning_source: Mapped[str | None] = mapped_column(String(16))
    # The model it asked for (workload.models); null: the endpoint's.
    model: Mapped[str | None] = mapped_column(String(256))
    # Its tool calls and how many were valid, whether its structured answer matched the
    # schema, and why what was not valid was not; null where not judged.
    tool_calls: Mapped[int | None]
    tool_calls_valid: Mapped[int | None]
    structured_valid: Mapped[bool | None]
    invalid_reasons: Mapped[list[str] | None] = mapped_column(ARRAY(String(16)))
    # Images it carried and their prompt tokens where usage said; null: none, or not said.
    images: Mapped[int | None] = mapped_column(SmallInteger)
    image_tokens: Mapped[int | None]


class TelemetrySample(Base):
    """One scraped value of an endpoint's Prometheus metrics during a run, written with COPY.

    `t` is seconds from the run's start on the worker's monotonic clock, like request times.
    """

    __tablename__ = "telemetry_samples"
    __table_args__ = (Index("ix_telemetry_samples_run_metric", "run_id", "metric", "t"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    t: Mapped[float] = mapped_column(Float)
    url: Mapped[str] = mapped_column(String(2048))
    metric: Mapped[str] = mapped_column(String(256))
    labels: Mapped[dict[str, str]] = mapped_column(JSONB)
    value: Mapped[float] = mapped_column(Float)
