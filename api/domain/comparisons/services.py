"""Comparisons across a team's runs and the frontier of one model (docs/cli-and-api.md,
GET /v1/comparisons): parameters checked here, the query in infercost.comparisons."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.csv import csv_cell, csv_text
from api.domain.comparisons.schemas import (
    ComparisonPage,
    ComparisonRow,
    Deployment,
    FrontierPoint,
    FrontierRead,
)
from api.domain.runs.schemas import SkippedLevel
from api.schemas import time_window
from infercost.comparisons import repository
from infercost.comparisons.frontier import Point, pareto_frontier
from infercost.comparisons.repository import (
    FIGURES,
    SORT_KEYS,
    Aggregate,
    ComparisonFilter,
    GroupBy,
    compare,
    count_client_bound_left_out,
    inadequate_left_out,
)
from infercost.errors import InvalidInput
from infercost.imports.parse import definitions_of
from infercost.planning.presets import PRESETS

#: Figures shown when the query names none: all of them.
DEFAULT_FIGURES = tuple(FIGURES)
FRONTIER_X = "per_user_tokens_per_s_p50"
FRONTIER_Y = "output_tokens_per_s_per_gpu"
_FRONTIER_FIGURES = (
    FRONTIER_X,
    FRONTIER_Y,
    "output_tokens_per_s",
    "cost_per_million_output_tokens_usd",
)
_CSV_KEYS = (
    "model",
    "engine",
    "hardware",
    "gpu_count",
    "mode",
    "level",
    "workload_fingerprint",
    "runs",
    "client_bound",
    "slo_passed",
    "adequate",
    "inadequate",
    "first_measured_at",
    "last_measured_at",
)


def figure_name(field: str, name: str) -> str:
    """A figure's canonical name; `ttft_p50` stands for `ttft_p50_ms`, `..._tokens` for
    `..._tokens_usd`, so the unit suffix may be left out."""
    for candidate in (name, f"{name}_ms", f"{name}_usd"):
        if candidate in FIGURES:
            return candidate
    raise InvalidInput(field, f"unknown figure '{name}'; known figures: {', '.join(FIGURES)}")


def parse_figures(text: str | None) -> list[str]:
    """`figures=ttft_p50,output_tokens_per_s`: canonical names in the order given."""
    if text is None or not text.strip():
        return list(DEFAULT_FIGURES)
    names = [n.strip() for n in text.split(",") if n.strip()]
    return list(dict.fromkeys(figure_name("figures", n) for n in names))


def parse_sort(text: str | None) -> list[tuple[str, bool]]:
    """`sort=-output_tokens_per_s,level`: (key, descending) pairs; `-` sorts descending."""
    if text is None or not text.strip():
        return []
    keys: list[tuple[str, bool]] = []
    for raw in (k.strip() for k in text.split(",")):
        if not raw:
            continue
        descending = raw.startswith("-")
        name = raw.lstrip("-+")
        if name not in SORT_KEYS:
            try:
                name = figure_name("sort", name)
            except InvalidInput:
                raise InvalidInput(
                    "sort",
                    f"cannot sort by '{name}'; sort by a figure ({', '.join(FIGURES)}) or by "
                    f"{', '.join(SORT_KEYS)}, with a leading '-' for descending",
                ) from None
        keys.append((name, descending))
    return keys


def parse_tags(tags: Sequence[str]) -> list[tuple[str, str | None]]:
    """`tag=env:prod` matches endpoints tagged env=prod; `tag=env` any with an env tag."""
    parsed: list[tuple[str, str | None]] = []
    for tag in tags:
        key, sep, value = tag.partition(":")
        if not key:
            raise InvalidInput("tag", f"'{tag}' names no key; write key:value, e.g. env:prod")
        parsed.append((key, value if sep else None))
    return parsed


@dataclass(frozen=True, slots=True)
class ComparisonQuery:
    """GET /v1/comparisons's parameters, checked and parsed."""

    filter: ComparisonFilter
    figures: list[str]
    sort: list[tuple[str, bool]]
    group_by: GroupBy = "deployment_level"
    aggregate: Aggregate = "median"
    limit: int | None = 50
    offset: int = 0


def comparison_filter(
    *,
    models: Sequence[str] = (),
    hardware: Sequence[str] = (),
    engines: Sequence[str] = (),
    endpoint_ids: Sequence[uuid.UUID] = (),
    tags: Sequence[str] = (),
    fingerprints: Sequence[str] = (),
    presets: Sequence[str] = (),
    modes: Sequence[str] = (),
    levels: Sequence[float] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    slo_passed: bool | None = None,
    include_client_bound: bool = False,
    split_by_model: bool = False,
) -> ComparisonFilter:
    """The filter of a query string; times must name their zone, `since` before `until`,
    presets must exist."""
    for name in presets:
        if name not in PRESETS:
            raise InvalidInput(
                "preset", f"unknown preset '{name}'; known presets: {', '.join(PRESETS)}"
            )
    time_window(since, until)
    return ComparisonFilter(
        models=tuple(models),
        hardware=tuple(hardware),
        engines=tuple(engines),
        endpoint_ids=tuple(endpoint_ids),
        tags=tuple(parse_tags(tags)),
        fingerprints=tuple(fingerprints),
        presets=tuple(presets),
        modes=tuple(modes),
        levels=tuple(levels),
        since=since,
        until=until,
        slo_passed=slo_passed,
        include_client_bound=include_client_bound,
        split_by_model=split_by_model,
    )


def _deployment(row: repository.ComparisonRow) -> Deployment:
    return msgspec.convert(row.deployment, Deployment)


def _row(row: repository.ComparisonRow) -> ComparisonRow:
    converted = msgspec.convert(row, ComparisonRow, from_attributes=True)
    return msgspec.structs.replace(converted, definitions=definitions_of(row.workload_fingerprint))


def _definitions_warning(fingerprints: Sequence[str | None]) -> str | None:
    """A warning when the rows follow more than one tool's definitions (imported runs)."""
    kinds = sorted({definitions_of(f) for f in fingerprints})
    if len(kinds) < 2:
        return None
    tools = [k for k in kinds if k != "infercost"]
    return (
        f"these rows follow {len(kinds)} definitions ({', '.join(kinds)}): rows whose "
        f"definitions are {' or '.join(tools)} were imported from that tool's results, and "
        "its TTFT, TPOT, ITL and throughput are its own (each run's source.differences says "
        "how they differ); they are never aggregated with infercost's runs"
    )


def _left_out_warning(count: int, what: str) -> str:
    return (
        f"{count} client-bound run(s) matching this query were left out of {what}: the load "
        "generator, not the deployment, set their pace (include_client_bound=true shows them)"
    )


def _workload_warning(fingerprints: Sequence[str | None]) -> str:
    named = ", ".join(
        "none (measured before fingerprints)" if f is None else f for f in fingerprints
    )
    return (
        f"these rows come from {len(fingerprints)} different workloads ({named}): only rows "
        "with the same workload_fingerprint measured the same requests; filter with "
        "workload_fingerprint=... to compare like with like"
    )


class ComparisonService:
    """Comparisons over one team's runs."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id

    async def compare(self, query: ComparisonQuery) -> ComparisonPage:
        """One page of rows with the workloads they come from and what to beware of."""
        result = await compare(
            self.session,
            self.team_id,
            query.filter,
            figures=query.figures,
            group_by=query.group_by,
            aggregate=query.aggregate,
            sort=query.sort,
            limit=query.limit,
            offset=query.offset,
        )
        warnings = []
        mixed = len(result.fingerprints) > 1
        if mixed:
            warnings.append(_workload_warning(result.fingerprints))
        mixed_definitions = _definitions_warning(result.fingerprints)
        if mixed_definitions:
            warnings.append(mixed_definitions)
        bound = sum(r.client_bound for r in result.rows)
        if bound:
            warnings.append(
                f"{bound} row(s) on this page include client-bound runs: the load generator, "
                "not the deployment, may have set their pace (see each run's client block)"
            )
        left_out = await count_client_bound_left_out(self.session, self.team_id, query.filter)
        if left_out:
            warnings.append(_left_out_warning(left_out, "these rows"))
        thin = sum(r.adequate is False for r in result.rows)
        if thin:
            warnings.append(
                f"{thin} row(s) on this page rest on inadequate evidence (adequate: false; "
                "see each row's inadequate reasons)"
            )
        shown = list(dict.fromkeys([*query.figures, *(k for k, _ in query.sort if k in FIGURES)]))
        return ComparisonPage(
            items=[_row(r) for r in result.rows],
            total=result.total,
            limit=query.limit if query.limit is not None else result.total,
            offset=query.offset,
            group_by=query.group_by,
            aggregate=query.aggregate,
            figures=shown,
            sort=[("-" if d else "") + k for k, d in query.sort],
            fingerprints=result.fingerprints,
            mixed_workloads=mixed,
            warnings=warnings,
            excluded={"client_bound": left_out} if left_out else {},
            inadequate_rows=thin,
            split="model" if query.filter.split_by_model else None,
        )

    async def frontier(
        self,
        model: str,
        f: ComparisonFilter,
        *,
        aggregate: Aggregate = "median",
        include_dominated: bool = False,
    ) -> FrontierRead:
        """The frontier of `model` over its deployments and levels, on one workload: the one
        `f` names, or the only one measured (several without a choice is a 422)."""
        # Only adequate evidence makes a point; what was left out is counted and named.
        f = replace(f, models=(model,), adequate_only=True)
        result = await compare(
            self.session,
            self.team_id,
            f,
            figures=_FRONTIER_FIGURES,
            group_by="deployment_level",
            aggregate=aggregate,
        )
        if len(result.fingerprints) > 1:
            raise InvalidInput(
                "workload_fingerprint",
                f"runs of model '{model}' come from {len(result.fingerprints)} workloads "
                f"({', '.join(str(x) for x in result.fingerprints)}); a frontier compares one: "
                "pass workload_fingerprint",
            )
        points = []
        for row in result.rows:
            x, y = row.figures[FRONTIER_X], row.figures[FRONTIER_Y]
            if x is not None and y is not None:
                points.append(Point(x=x, y=y, item=row))
        split = pareto_frontier(points)

        def point(p: Point[repository.ComparisonRow], by: int | None = None) -> FrontierPoint:
            row = p.item
            return FrontierPoint(
                deployment=_deployment(row),
                mode=row.mode,
                level=row.level,
                per_user_tokens_per_s_p50=p.x,
                output_tokens_per_s_per_gpu=p.y,
                output_tokens_per_s=row.figures["output_tokens_per_s"],
                cost_per_million_output_tokens_usd=row.figures[
                    "cost_per_million_output_tokens_usd"
                ],
                run_ids=row.run_ids,
                client_bound=row.client_bound,
                slo_passed=row.slo_passed,
                dominated_by=by,
            )

        warnings = []
        if any(r.client_bound for r in result.rows):
            warnings.append(
                "some points include client-bound runs: the load generator, not the "
                "deployment, may have set their pace"
            )
        bound = await count_client_bound_left_out(self.session, self.team_id, f)
        if bound:
            warnings.append(_left_out_warning(bound, "the frontier"))
        thin, skipped = await inadequate_left_out(self.session, self.team_id, f)
        if thin:
            warnings.append(
                f"{thin} run(s) with inadequate evidence were left out of the frontier "
                "(too few requests, too short, ...: see skipped)"
            )
        excluded = {k: v for k, v in (("client_bound", bound), ("inadequate", thin)) if v}
        return FrontierRead(
            model=model,
            workload_fingerprint=result.fingerprints[0] if result.fingerprints else None,
            x=FRONTIER_X,
            y=FRONTIER_Y,
            aggregate=aggregate,
            frontier=[point(p) for p in split.on],
            dominated=[point(p, by) for p, by in split.dominated] if include_dominated else None,
            left_out=len(result.rows) - len(points),
            warnings=warnings,
            excluded=excluded,
            skipped=msgspec.convert(skipped, list[SkippedLevel], from_attributes=True),
        )


def comparison_csv(page: ComparisonPage) -> str:
    """The page as CSV: one row per comparison row, its figures as columns, run ids
    space-separated in the last column."""
    # The model each row's requests asked for, beside the deployment's, with split=model.
    keys = ("model", "served_model", *_CSV_KEYS[1:]) if page.split else _CSV_KEYS
    rows = []
    for row in page.items:
        values: dict[str, object] = {
            "model": row.deployment.model,
            "served_model": row.served_model,
            "engine": row.deployment.engine,
            "hardware": row.deployment.hardware,
            "gpu_count": row.deployment.gpu_count,
            "mode": row.mode,
            "level": row.level,
            "workload_fingerprint": row.workload_fingerprint,
            "runs": row.runs,
            "client_bound": row.client_bound,
            "slo_passed": row.slo_passed,
            "adequate": row.adequate,
            # The reason codes, space-separated like run_ids.
            "inadequate": " ".join(r.code for r in row.inadequate),
            "first_measured_at": row.first_measured_at,
            "last_measured_at": row.last_measured_at,
        }
        cells = [values[k] for k in keys] + [row.figures.get(n) for n in page.figures]
        rows.append([*map(csv_cell, cells), " ".join(str(r) for r in row.run_ids)])
    return csv_text([*keys, *page.figures, "run_ids"], rows)
