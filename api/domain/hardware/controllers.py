"""GPU catalog routes."""

from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from api.auth import team_service
from api.domain.audit.services import AuditTrail
from api.domain.hardware.schemas import HardwareCreate, HardwareRead
from api.domain.hardware.services import HardwareService, to_read
from api.schemas import PathId


class HardwareController(Controller):
    """GET, POST /v1/hardware; GET /v1/hardware/{id}."""

    path = "/v1/hardware"
    tags = ["hardware"]
    dependencies = {"hardware": team_service(HardwareService)}

    @get("/", summary="List the GPU catalog")
    async def list_hardware(self, hardware: NamedDependency[HardwareService]) -> list[HardwareRead]:
        """Seeded public SKUs and your team's additions."""
        return [to_read(hw) for hw in await hardware.list()]

    @get("/{hardware_id:uuid}", summary="Read one GPU SKU")
    async def get_hardware(
        self, hardware: NamedDependency[HardwareService], hardware_id: PathId
    ) -> HardwareRead:
        """One SKU's specs."""
        return to_read(await hardware.get(hardware_id))

    @post("/", status_code=201, summary="Add a GPU SKU")
    async def create_hardware(
        self,
        hardware: NamedDependency[HardwareService],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[HardwareCreate],
    ) -> HardwareRead:
        """Add hardware the public catalog lacks; only your team sees it."""
        read = to_read(await hardware.create(data))
        await audit.record(
            "hardware.create", "hardware", read.id, f"added hardware '{read.name}'", data
        )
        return read
