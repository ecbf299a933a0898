"""GET /v1/endpoints/{endpoint_id}/history."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from api.auth import team_service
from api.domain.history.schemas import History
from api.domain.history.services import DEFAULT_LIMIT, MAX_LIMIT, HistoryQuery, HistoryService
from api.schemas import PathId, Since, Until


class HistoryController(Controller):
    """The same workload on one endpoint over time, with each run's change."""

    path = "/v1/endpoints/{endpoint_id:uuid}/history"
    tags = ["history"]
    dependencies = {"history": team_service(HistoryService)}

    @get(
        "/",
        summary="An endpoint's runs over time, with regressions and improvements flagged",
        description=(
            "The endpoint's succeeded runs grouped into series by workload fingerprint, mode "
            "and load level, each oldest first, with each run's change against its baseline "
            "(the previous comparable run): a Mann-Whitney U test on the per-request TTFT, "
            "TPOT and E2E latencies, the relative change of the median with a 95 % bootstrap "
            "interval, and Cliff's delta. The median check flags a regression when p < 0.01, "
            "the interval lies wholly above 0 and the median rose by 5 % or more (an "
            "improvement the same the other way). A tail check does "
            "the same for the p95: a quantile test (Mood's test, the requests above the "
            "pooled p95 compared with Fisher's exact test) and the p95's relative change "
            "with its 95 % bootstrap interval, flagged the same way when the p95 moved by "
            "10 % or more; it needs 100 requests a side (else its "
            "verdict is insufficient_data and the median check decides alone). A metric is "
            "a regression when either check regressed (`flagged_by` names which), under 20 "
            "requests a side it is insufficient_data, and a run regressed when any metric did."
        ),
    )
    async def endpoint_history(
        self,
        *,
        history: NamedDependency[HistoryService],
        endpoint_id: PathId,
        workload_fingerprint: Annotated[
            str | None, QueryParameter(description="only this workload (a run's fingerprint)")
        ] = None,
        mode: Annotated[
            str | None,
            QueryParameter(description="only runs of this mode: concurrency, rate or burst"),
        ] = None,
        level: Annotated[
            float | None, QueryParameter(description="only this load level (concurrency or rate)")
        ] = None,
        since: Since = None,
        until: Until = None,
        split: Annotated[
            Literal["model"] | None,
            QueryParameter(
                description="model: a series per model or adapter the runs' requests asked "
                "for (workload.models), each point that model's figures"
            ),
        ] = None,
        model: Annotated[
            str | None,
            QueryParameter(description="with split=model: only this model's series"),
        ] = None,
        limit: Annotated[
            int,
            QueryParameter(
                description=f"the latest this many runs of each series, 1 to {MAX_LIMIT}"
            ),
        ] = DEFAULT_LIMIT,
    ) -> History:
        """Series of points in time order; 404 for an endpoint that is not the team's."""
        query = HistoryQuery(
            workload_fingerprint=workload_fingerprint,
            mode=mode,
            level=level,
            since=since,
            until=until,
            limit=limit,
            split_by_model=split == "model",
            model=model,
        )
        return await history.history(endpoint_id, query)
