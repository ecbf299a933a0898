"""Request and response shapes for jobs (docs/cli-and-api.md): the job a user submits, its progress,
its place in the queue, and the job as read back with its runs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import msgspec

from api.domain.plans.schemas import Load, Slo, Workload
from api.domain.runs.schemas import CapacityAtSlo, RunSummary, Sweep


class JobCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/jobs. `force`: submit even though the endpoint's last preflight check
    failed (otherwise 409 with the check's reason); not stored with the job."""

    endpoint_id: Annotated[
        uuid.UUID,
        msgspec.Meta(
            description="The endpoint to benchmark (POST /v1/endpoints returns its id)",
            examples=["3f2b8c1d-5e6a-4b7c-8d9e-0f1a2b3c4d5e"],
        ),
    ]
    workload: Annotated[
        Workload,
        msgspec.Meta(
            description="What each request asks for: prompt and output lengths, sampling, "
            "streaming",
            examples=[{"input_tokens": {"mean": 512, "std": 64}, "output_tokens": {"mean": 128}}],
        ),
    ]
    load: Annotated[
        Load,
        msgspec.Meta(
            description="The load plan: levels, how long each lasts, warm-up",
            examples=[{"mode": "concurrency", "levels": [1, 8, 32], "requests_per_level": 200}],
        ),
    ]
    slo: Annotated[
        Slo | None,
        msgspec.Meta(
            description="Service-level objective each run is judged against; absent: the preset's,"
            " or none",
            examples=[{"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}],
        ),
    ] = None
    force: Annotated[
        bool,
        msgspec.Meta(
            description="Submit even though the endpoint's last preflight check failed (otherwise "
            "409 with the check's reason); not stored",
            examples=[False],
        ),
    ] = False
    strict: Annotated[
        bool,
        msgspec.Meta(
            description="Refuse (422) a plan whose levels cannot give adequate evidence (too few "
            "requests, windows shorter than the adequacy minimum) instead of accepting it with "
            "`warnings`; not stored",
            examples=[False],
        ),
    ] = False


class Progress(msgspec.Struct):
    """Requests done out of all requests the job will send (warm-up included).

    A level of fixed duration counts rate x duration_s until it starts (then its schedule's
    exact count); a concurrency level of fixed duration counts the requests done so far until
    it ends. When a job succeeds, done equals total.
    """

    done: int
    total: int


class QueueEstimate(msgspec.Struct):
    """Where a queued or running job stands and when it should start and end.

    Jobs of every team wait on one queue and run one at a time per worker; the teams'
    lines are served in turn (a job waits behind its own team's earlier jobs and each other
    team's next one, not behind another team's backlog). Lengths come from the plan where
    it fixes them (rates, durations) and otherwise from the endpoint's pace in its latest
    run; `basis` says which, and why an estimate is missing (null). Estimates assume as
    many workers as jobs running now.
    """

    position: Annotated[
        int | None,
        msgspec.Meta(
            description="1 when it starts next; how many queued jobs are ahead of it, plus "
            "one. Null once it runs",
            examples=[2],
        ),
    ]
    jobs_running: Annotated[
        int, msgspec.Meta(description="Jobs running now, all teams", examples=[1])
    ]
    estimated_start_at: Annotated[
        datetime | None,
        msgspec.Meta(description="When it should start (UTC); its start once it runs"),
    ]
    estimated_end_at: Annotated[
        datetime | None, msgspec.Meta(description="When it should end (UTC)")
    ]
    basis: Annotated[
        str,
        msgspec.Meta(
            description="What the estimate rests on, or why there is none",
            examples=["1 queued ahead, 1 running, 1 worker (as many as jobs running now)"],
        ),
    ]


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


class PlanWarning(msgspec.Struct):
    """An adequacy reason the plan decides before it runs: every listed level will be flagged
    with `code` (as its run's `adequacy` says it) whatever the endpoint does."""

    code: Annotated[
        str,
        msgspec.Meta(
            description="few_requests, short or concurrency_not_held", examples=["few_requests"]
        ),
    ]
    levels: Annotated[
        list[float], msgspec.Meta(description="The load levels it applies to", examples=[[64]])
    ]
    detail: Annotated[
        str,
        msgspec.Meta(
            description="What it means and what to change",
            examples=[
                "measured requests per level (64 users: 10) are under the 100 a p99 needs: ..."
            ],
        ),
    ]


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
    # Queued and running jobs only: place in the queue, expected start and end.
    queue: QueueEstimate | None = None
    # Whether its runs were imported from another tool's result file (POST /v1/imports):
    # they never ran here, and each run's `source` names the tool and its definitions.
    imported: bool = False


class JobSubmitted(JobRead):
    """The job as POST /v1/jobs accepted it, with what its plan already decides about its
    evidence (`warnings`, empty when nothing; `strict: true` refuses such a plan instead)."""

    warnings: list[PlanWarning] = msgspec.field(default_factory=list)
