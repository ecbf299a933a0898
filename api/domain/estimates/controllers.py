"""POST /v1/estimates; GET /v1/presets, GET /v1/presets/{name}."""

from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from api.auth import CurrentCaller, team_service
from api.domain.estimates.schemas import EstimateCreate, EstimateRead, PresetRead
from api.domain.estimates.services import EstimateService
from api.openapi import problem_responses
from infercost.planning.presets import PRESETS, WorkloadPreset, get_preset


def preset_read(preset: WorkloadPreset) -> PresetRead:
    """The response shape of a preset."""
    return PresetRead(
        name=preset.name,
        description=preset.description,
        input_tokens=dict(preset.input_tokens),
        output_tokens=dict(preset.output_tokens),
        slo=preset.default_slo(),
        optimises=preset.optimises,
        also_watch=list(preset.also_watch),
    )


class EstimateController(Controller):
    """POST /v1/estimates."""

    path = "/v1/estimates"
    tags = ["estimates"]
    dependencies = {"estimates": team_service(EstimateService)}

    @post(
        "/",
        status_code=200,
        summary="Cost and capacity for a traffic profile and SLO",
        # 404: no endpoint of the team serves the model, so nothing was measured.
        responses=problem_responses(404),
    )
    async def create_estimate(
        self, estimates: NamedDependency[EstimateService], data: JSONBody[EstimateCreate]
    ) -> EstimateRead:
        """Every deployment of the model you have measured (and hosted APIs you have priced),
        sized for the traffic at the SLO and ranked by USD per hour, cheapest first."""
        return await estimates.estimate(data)


class PresetController(Controller):
    """GET /v1/presets; GET /v1/presets/{name}."""

    path = "/v1/presets"
    tags = ["estimates"]

    @get("/", summary="List workload presets")
    async def list_presets(self, caller: CurrentCaller) -> list[PresetRead]:
        """Application types with their token lengths, default SLO and the figure to watch."""
        return [preset_read(p) for p in PRESETS.values()]

    # An unknown name is a 422 that lists the known ones.
    @get("/{name:str}", summary="Read a workload preset", responses=problem_responses(422))
    async def get_preset(self, caller: CurrentCaller, name: FromPath[str]) -> PresetRead:
        """One preset; an unknown name lists the known ones."""
        return preset_read(get_preset(name))
