"""`infercost submit --watch`: follow a job over GET /v1/jobs/{id} until it ends.

Each poll turns the job into one `LevelView` per load level (planned, running with the
worker's live figures, or finished with its summary's). A terminal gets one rich progress
bar per level; anything else (a pipe, a CI log) gets plain lines, printed when a level
starts, at most every few seconds while it runs, and when it ends, so logs stay short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from cli.client import ApiClient
from infercost.jobs.plan import read_load
from infercost.reports.data import level_label
from infercost.reports.numbers import fixed

FINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
#: How often the job is read while it runs (the worker writes progress about twice a second).
POLL_S = 0.5
#: How often a running level gets a plain progress line (non-terminal output).
LINE_EVERY_S = 5.0


def cells(*values: object) -> list[Text]:
    """Table cells shown as written: API text (model, endpoint, hardware names) is never
    read as rich markup, so "model[awq]" stays whole and "x[/]y" cannot raise."""
    return [Text(str(value)) for value in values]


def fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    """A figure for display with `digits` decimals but at least three significant figures,
    or '-' when it is not known."""
    if value is None:
        return "-"
    return f"{fixed(value, digits)}{unit}"


def _when(at: str | None, now: datetime) -> str | None:
    """'14:05 UTC (in 3 min)' for an ISO time from the API."""
    if at is None:
        return None
    moment = datetime.fromisoformat(at).astimezone(UTC)
    seconds = (moment - now).total_seconds()
    if seconds < 90:
        away = "in under 2 min" if seconds > 0 else "now"
    elif seconds < 5400:
        away = f"in {seconds / 60:.0f} min"
    else:
        away = f"in {seconds / 3600:.1f} h"
    return f"{moment:%H:%M} UTC ({away})"


def queue_text(job: Mapping[str, Any], now: datetime | None = None) -> str | None:
    """A job's place in the queue and expected start and end, in a sentence; None once it
    has ended (or when the API gave no estimate block)."""
    queue = job.get("queue")
    if not queue:
        return None
    now = now or datetime.now(UTC)
    end = _when(queue["estimated_end_at"], now)
    if queue["position"] is None:
        return f"running, ends about {end}" if end else f"running; {queue['basis']}"
    place = "next in line" if queue["position"] == 1 else f"number {queue['position']} in line"
    start = _when(queue["estimated_start_at"], now)
    if start is None:
        return f"queued, {place}; {queue['basis']}"
    text = f"queued, {place}, starts about {start}"
    return text + (f", ends about {end}" if end else "")


@dataclass(frozen=True, slots=True)
class LevelView:
    """What is known about one load level at one poll.

    Running: `done`/`planned` count its requests with warm-up (planned None while unknown)
    and the figures are the worker's live ones. Finished: `done` is the measured requests,
    `failed` those that failed, and the figures are the run summary's.
    """

    index: int
    label: str
    status: str  # planned, running, succeeded, failed or cancelled
    done: int = 0
    planned: int | None = None
    failed: int | None = 0  # None while unknown (a sharded level's errors, until it ends)
    ttft_ms_p50: float | None = None
    output_tokens_per_s: float | None = None

    @property
    def finished(self) -> bool:
        """Whether the level's run has ended (its figures are final)."""
        return self.status in FINAL_STATUSES

    def figures(self) -> str:
        """TTFT and throughput as one short text."""
        return (
            f"TTFT p50 {fmt(self.ttft_ms_p50, ' ms')}, "
            f"{fmt(self.output_tokens_per_s, ' output tok/s')}"
        )

    def errors(self) -> str:
        """'3 errors', or '? errors' while the count is unknown."""
        return f"{'?' if self.failed is None else self.failed} errors"

    def line(self) -> str:
        """A plain progress line for this level."""
        head = f"level {self.index + 1} ({self.label})"
        if self.status == "planned":
            return f"{head}: planned"
        if self.finished:
            return (
                f"{head}: {self.status}, {self.done} measured requests ({self.failed} failed), "
                f"{self.figures()}"
            )
        of = "?" if self.planned is None else str(self.planned)
        return f"{head}: {self.done}/{of} requests, {self.errors()}, {self.figures()}"


def _planned_levels(job: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """(mode, level) of every level the job will run so far as known; a sweep's levels not
    yet chosen have level None."""
    load = read_load(job["load"])
    if load is None:
        return []
    if load.mode == "sweep":
        sweep = job.get("sweep") or {}
        chosen = [(str(x["mode"]), float(x["level"])) for x in sweep.get("levels") or []]
        planned = int(sweep.get("planned_levels") or len(chosen))
        return chosen + [("sweep", None)] * max(0, planned - len(chosen))
    return [(load.mode, level) for level in load.levels or []]


def level_views(job: Mapping[str, Any]) -> list[LevelView]:
    """One view per level of the job: its runs (in level order) and the levels still to come."""
    runs: Sequence[Mapping[str, Any]] = job.get("runs") or []
    views: list[LevelView] = []
    planned = _planned_levels(job)
    for index in range(max(len(planned), len(runs))):
        if index < len(runs):
            run = runs[index]
            label = level_label(float(run["level"]), str(run["mode"]))
            views.append(_run_view(index, label, run))
            continue
        mode, level = planned[index]
        label = "chosen by the sweep" if level is None else level_label(level, mode)
        if job.get("status") in FINAL_STATUSES:
            continue  # never ran: the job stopped before it
        views.append(LevelView(index, label, "planned"))
    return views


def _run_view(index: int, label: str, run: Mapping[str, Any]) -> LevelView:
    status = str(run["status"])
    if status == "running":
        live = run.get("live") or {}
        return LevelView(
            index,
            label,
            status,
            done=int(live.get("done") or 0),
            planned=live.get("planned"),
            # Null in a sharded level's live block: its shards report only their counts.
            failed=None if live and live.get("errors") is None else int(live.get("errors") or 0),
            ttft_ms_p50=live.get("ttft_ms_p50"),
            output_tokens_per_s=live.get("output_tokens_per_s"),
        )
    requests = run.get("requests") or {}
    return LevelView(
        index,
        label,
        status,
        done=int(requests.get("total") or 0),
        planned=int(requests.get("total") or 0),
        failed=int(requests.get("failed") or 0),
        ttft_ms_p50=(run.get("ttft_ms") or {}).get("p50"),
        output_tokens_per_s=run.get("output_tokens_per_s"),
    )


class Display(Protocol):
    """Where a watched job's progress goes: bars on a terminal, lines elsewhere."""

    def update(self, job: Mapping[str, Any]) -> None:
        """Show the job as just read."""

    def close(self) -> None:
        """Stop drawing (the job ended or the user stopped watching)."""


class LineDisplay:
    """Plain progress lines for logs: a line when the job or a level changes state, when a
    running level's first requests finish, then at most one every `every_s` seconds while
    its count moves."""

    def __init__(
        self,
        console: Console,
        every_s: float = LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.every_s = every_s
        self.clock = clock
        self._job_status: str | None = None
        self._shown: dict[int, tuple[str, int, float]] = {}  # index -> (status, done, at)

    def update(self, job: Mapping[str, Any]) -> None:
        """Print what changed since the previous poll."""
        if job["status"] != self._job_status:
            self._job_status = job["status"]
            if job["status"] not in FINAL_STATUSES:
                self._print(f"job {job['id']}: {queue_text(job) or job['status']}")
        now = self.clock()
        for view in level_views(job):
            if view.status == "planned":
                continue
            text = self._due(view, now)
            if text is not None:
                self._shown[view.index] = (view.status, view.done, now)
                self._print(text)

    def _due(self, view: LevelView, now: float) -> str | None:
        """The line to print for a level now, or None: on a change of state; for a running
        level, when its first requests finish, then every `every_s` while its count moves."""
        last = self._shown.get(view.index)
        if last is None or last[0] != view.status:
            if view.status == "running" and not view.done:
                return f"level {view.index + 1} ({view.label}): started"
            return view.line()
        _, done, at = last
        if view.status != "running" or view.done == done:
            return None
        if done and now - at < self.every_s:
            return None
        return view.line()

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Nothing to tear down for lines."""


class BarDisplay:
    """One rich progress bar per level, with its running then final TTFT and throughput."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            # markup off: the description and state hold API text (statuses, labels).
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[state]}", markup=False),
            console=console,
        )
        self.tasks: dict[int, TaskID] = {}
        self._job_status: str | None = None
        self.progress.start()

    def update(self, job: Mapping[str, Any]) -> None:
        """Redraw every level's bar, with a line when the job starts to wait or to run."""
        if job["status"] != self._job_status:
            self._job_status = job["status"]
            waiting = queue_text(job)
            if waiting:
                self.progress.console.print(waiting, markup=False, highlight=False)
        for view in level_views(job):
            task = self.tasks.get(view.index)
            description = f"level {view.index + 1} ({view.label})"
            if task is None:
                task = self.progress.add_task(description, total=None, state="")
                self.tasks[view.index] = task
            if view.status == "planned":
                self.progress.update(task, description=description, state="waiting")
            elif view.finished:
                total = max(view.done, 1)
                state = f"{view.status}: {view.failed} failed, {view.figures()}"
                self.progress.update(task, total=total, completed=total, state=state)
            else:
                state = f"{view.errors()}, {view.figures()}"
                self.progress.update(
                    task,
                    description=description,
                    total=view.planned,
                    completed=view.done,
                    state=state,
                )

    def close(self) -> None:
        """Leave the final bars on screen."""
        self.progress.stop()


def watch_job(
    client: ApiClient, job_id: str, display: Display, poll_s: float = POLL_S
) -> dict[str, Any]:
    """Poll the job until it ends, showing each read on `display`; returns the final job."""
    try:
        while True:
            job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}")
            display.update(job)
            if job["status"] in FINAL_STATUSES:
                return job
            time.sleep(poll_s)
    finally:
        display.close()


def replay_text(job: Mapping[str, Any]) -> str | None:
    """A trace replay's own figures in two lines: what time_scale compressed and how late
    the client sent against the trace's schedule, then the SLO attained per interval; None
    for other jobs or before the replay's run finished."""
    blocks = [r["replay"] for r in job.get("runs") or [] if r.get("replay")]
    if not blocks:
        return None
    replay = blocks[0]
    late = replay["send_lateness_ms"]
    lines = [
        f"replay: {replay['compressed']}; {replay['sent']:,} of the window's "
        f"{replay['traffic_requests']:,} requests sent, send lateness p50 "
        f"{fmt(late['p50'], digits=2)} ms, p99 {fmt(late['p99'], digits=2)} ms"
    ]
    shares = [i["slo_attainment"] for i in replay["intervals"]]
    if any(share is not None for share in shares):
        cells = ", ".join("-" if share is None else f"{share:.0%}" for share in shares)
        lines.append(f"SLO attained per {replay['interval_s']:g} s of trace: {cells}")
    return "\n".join(lines)


def capacity_text(job: Mapping[str, Any]) -> str | None:
    """The job's capacity at its SLO and its cost there, in a sentence that says which cost
    it is (the table's costs are each level's own load); None for a job without an SLO or
    before any level finished."""
    block = job.get("capacity_at_slo")
    if not block or not job.get("runs"):
        return None
    if block.get("requests_per_s") is None:
        reason = block.get("reason")
        return None if reason is None else f"capacity at the SLO: none ({reason})"
    low, high = block.get("requests_per_s_low"), block.get("requests_per_s_high")
    if block.get("lower_bound"):
        where = " (a lower bound: every level passed)"
    elif high is not None and low is not None:
        where = f" (between {fmt(low, digits=2)} and {fmt(high, digits=2)} req/s measured)"
    else:
        where = ""
    if block.get("monotone") is False:
        where += "; throughput fell at a higher load, so this is the best passing level"
    cost = block.get("per_million_output_tokens_usd")
    priced = (
        ""
        if cost is None
        else f", USD {fmt(cost, digits=2)} per million output tokens at that load "
        f"(USD {fmt(block.get('usd_per_hour'), digits=2)}/h a replica)"
    )
    return (
        f"capacity at the SLO: {fmt(block['requests_per_s'], digits=2)} req/s a replica"
        f"{where}{priced}. The table's $/M is each level's own load; "
        "`infercost estimate` prices your traffic"
    )


def summary_table(job: Mapping[str, Any]) -> Table:
    """The job's levels side by side: requests, latency, throughput, the cost at each
    level's own load, and the SLO verdict."""
    table = Table()
    for name, right in (
        ("level", False),
        ("status", False),
        ("requests", True),
        ("failed", True),
        ("TTFT p50 ms", True),
        ("TTFT p95 ms", True),
        ("TPOT p50 ms", True),
        ("output tok/s", True),
        ("req/s", True),
        ("$/M out at level", True),
        ("SLO", False),
        ("evidence", False),
    ):
        table.add_column(name, justify="right" if right else "left")
    for run in job.get("runs") or []:
        ttft = run.get("ttft_ms") or {}
        tpot = run.get("tpot_ms") or {}
        requests = run.get("requests") or {}
        slo = run.get("slo_passed")
        table.add_row(
            *cells(
                level_label(float(run["level"]), str(run["mode"])),
                str(run["status"]),
                str(requests.get("total", "-")),
                str(requests.get("failed", "-")),
                fmt(ttft.get("p50")),
                fmt(ttft.get("p95")),
                fmt(tpot.get("p50"), digits=2),
                fmt(run.get("output_tokens_per_s")),
                fmt(run.get("requests_per_s"), digits=2),
                fmt((run.get("cost") or {}).get("per_million_output_tokens_usd"), digits=2),
                "-" if slo is None else ("pass" if slo else "fail"),
                evidence_text(run.get("adequacy")),
            )
        )
    return table


def evidence_text(adequacy: Mapping[str, Any] | None) -> str:
    """A level's adequacy verdict in a table cell: 'ok', 'INADEQUATE: few_requests, short',
    or '-' for levels measured before verdicts."""
    if not adequacy:
        return "-"
    if adequacy.get("ok"):
        return "ok"
    codes = [str(r.get("code")) for r in adequacy.get("reasons") or []]
    return "INADEQUATE: " + ", ".join(codes)
