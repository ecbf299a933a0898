"""GET /v1/comparisons (JSON or CSV); GET /v1/comparisons/frontier."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec
from litestar import Controller, MediaType, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromQuery, QueryParameter
from litestar.response.base import ASGIResponse

from api.auth import team_service
from api.csv import csv_attachment, wants_csv
from api.domain.comparisons.schemas import ComparisonPage, FrontierRead
from api.domain.comparisons.services import (
    ComparisonQuery,
    ComparisonService,
    comparison_csv,
    comparison_filter,
    parse_figures,
    parse_sort,
)
from api.schemas import MAX_PAGE, Offset, Since, Until
from infercost.comparisons.repository import FIGURES, SORT_KEYS, Aggregate, GroupBy

Many = Annotated[list[str] | None, QueryParameter(description="repeat to match any of several")]
SloPassed = Annotated[
    bool | None,
    QueryParameter(description="only runs that passed (true) or failed (false) their SLO"),
]
IncludeClientBound = Annotated[
    bool,
    QueryParameter(description="keep runs flagged client_bound (left out by default)"),
]
AggregateParam = Annotated[
    Aggregate,
    QueryParameter(
        description="how repeated runs of one deployment and level combine: median of each "
        "figure (default), or the latest run's figures"
    ),
]


class ComparisonController(Controller):
    """GET /v1/comparisons; GET /v1/comparisons/frontier."""

    path = "/v1/comparisons"
    tags = ["comparisons"]
    dependencies = {"comparisons": team_service(ComparisonService)}

    @get(
        "/",
        summary="Figures side by side across models, hardware, engines and time",
        description=(
            "One row per deployment (model, engine, hardware, GPU count), load level and "
            "workload fingerprint, over your team's succeeded runs; `Accept: text/csv` for a "
            f"spreadsheet. Figures: {', '.join(FIGURES)}. Sort keys: those figures and "
            f"{', '.join(SORT_KEYS)}."
        ),
        responses={
            200: ResponseSpec(
                data_container=ComparisonPage,
                # Examples come from the fields' own; generated ones are random text.
                generate_examples=False,
                description="A page of rows (JSON), or the same rows as CSV (Accept: text/csv)",
            )
        },
    )
    async def list_comparisons(
        self,
        *,
        request: Request[object, object, State],
        comparisons: NamedDependency[ComparisonService],
        model: Many = None,
        hardware: Many = None,
        engine: Many = None,
        endpoint_id: Annotated[
            list[uuid.UUID] | None, QueryParameter(description="repeat to match any of several")
        ] = None,
        tag: Annotated[
            list[str] | None,
            QueryParameter(
                description="endpoint tag key:value (or just key); repeat: all must match"
            ),
        ] = None,
        workload_fingerprint: Many = None,
        preset: Annotated[
            list[str] | None,
            QueryParameter(
                description="runs of jobs that named this workload preset (GET /v1/presets)"
            ),
        ] = None,
        mode: Annotated[
            list[Literal["concurrency", "rate", "burst", "trace"]] | None,
            QueryParameter(
                description="concurrency (closed loop), rate (open loop), burst (requests "
                "sent at once) or trace (a traffic log replayed)"
            ),
        ] = None,
        level: Annotated[
            list[float] | None,
            QueryParameter(description="load levels (users, or requests/s); repeat for several"),
        ] = None,
        since: Since = None,
        until: Until = None,
        slo_passed: SloPassed = None,
        include_client_bound: IncludeClientBound = False,
        group_by: Annotated[
            GroupBy,
            QueryParameter(
                description="deployment_level: a row per deployment and level; deployment: a "
                "row per deployment, at its level with the highest output tokens/s"
            ),
        ] = "deployment_level",
        aggregate: AggregateParam = "median",
        split: Annotated[
            Literal["model"] | None,
            QueryParameter(
                description="model: a row per model or adapter the runs' requests asked for "
                "(workload.models), with that model's own figures"
            ),
        ] = None,
        figures: Annotated[
            str | None,
            QueryParameter(description="comma-separated figure names (default: all)"),
        ] = None,
        sort: Annotated[
            str | None,
            QueryParameter(description="comma-separated keys, '-' for descending, nulls last"),
        ] = None,
        limit: Annotated[
            int | None,
            QueryParameter(
                ge=1,
                le=MAX_PAGE,
                description=f"rows per page, 1 to {MAX_PAGE}: 50 for JSON, all for CSV",
            ),
        ] = None,
        offset: Offset = 0,
    ) -> ASGIResponse:
        """Filtered, grouped, aggregated, sorted, paged; warns when rows mix workloads."""
        csv = wants_csv(request)
        query = ComparisonQuery(
            filter=comparison_filter(
                models=model or (),
                hardware=hardware or (),
                engines=engine or (),
                endpoint_ids=endpoint_id or (),
                tags=tag or (),
                fingerprints=workload_fingerprint or (),
                presets=preset or (),
                modes=mode or (),
                levels=level or (),
                since=since,
                until=until,
                slo_passed=slo_passed,
                include_client_bound=include_client_bound,
                split_by_model=split == "model",
            ),
            figures=parse_figures(figures),
            sort=parse_sort(sort),
            group_by=group_by,
            aggregate=aggregate,
            limit=limit if limit is not None or csv else 50,
            offset=offset,
        )
        page = await comparisons.compare(query)
        if csv:
            headers = {"X-Total-Count": str(page.total)}
            if page.mixed_workloads:
                headers["X-Mixed-Workloads"] = "true"
            return csv_attachment(comparison_csv(page), "comparison.csv", headers)
        return ASGIResponse(body=msgspec.json.encode(page), media_type=MediaType.JSON)

    @get("/frontier", summary="Throughput per GPU against per-user speed: the frontier")
    async def frontier(
        self,
        *,
        comparisons: NamedDependency[ComparisonService],
        model: FromQuery[str],
        workload_fingerprint: Annotated[
            str | None,
            QueryParameter(description="the workload; may be left out when the model has only one"),
        ] = None,
        since: Since = None,
        until: Until = None,
        slo_passed: SloPassed = None,
        include_client_bound: IncludeClientBound = False,
        aggregate: AggregateParam = "median",
        include_dominated: Annotated[
            bool, QueryParameter(description="also return the points not on the frontier")
        ] = False,
    ) -> FrontierRead:
        """Every measured deployment and level of one model on one workload as a point (x:
        median per-user tokens/s, y: output tokens/s per GPU, with cost per million output
        tokens); the points no other beats on both axes, by x ascending."""
        f = comparison_filter(
            fingerprints=[workload_fingerprint] if workload_fingerprint else (),
            since=since,
            until=until,
            slo_passed=slo_passed,
            include_client_bound=include_client_bound,
        )
        return await comparisons.frontier(
            model, f, aggregate=aggregate, include_dominated=include_dominated
        )
