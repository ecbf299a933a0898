"""Registering, changing and removing endpoints; credentials are write-only."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


async def test_endpoint_lifecycle(team: TeamClient, db: object) -> None:
    created = await team.create_endpoint(
        name="vllm-llama8b-h200",
        base_url="http://192.0.2.10:8000/v1/",
        api_key="sk-secret",
        metrics_urls=["http://192.0.2.10:8000/metrics"],
        tags={"env": "staging"},
        gpu_count=2,
    )
    assert created["base_url"] == "http://192.0.2.10:8000/v1"
    assert created["hardware"] == "H200-SXM"
    assert created["has_api_key"] is True
    assert "api_key" not in created and "sk-secret" not in str(created)
    stored = await db.fetchval(  # type: ignore[attr-defined]
        "SELECT api_key_encrypted FROM endpoints WHERE name = 'vllm-llama8b-h200'"
    )
    assert stored and b"sk-secret" not in stored

    again = await team.http.post(
        "/v1/endpoints", json={"name": "vllm-llama8b-h200", "base_url": "http://h/v1", "model": "m"}
    )
    assert again.status_code == 409

    patched = await team.http.patch(
        f"/v1/endpoints/{created['id']}",
        json={"usd_per_hour": 7.0, "api_key": None, "hardware": "H100-SXM"},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["usd_per_hour"] == 7.0 and body["has_api_key"] is False
    assert (
        body["hardware"] == "H100-SXM"
        and body["gpu_count"] == 2
        and body["tags"] == {"env": "staging"}
    )

    listing = (await team.http.get("/v1/endpoints")).json()
    assert [e["name"] for e in listing["items"]] == ["vllm-llama8b-h200"]
    assert (await team.http.delete(f"/v1/endpoints/{created['id']}")).status_code == 204
    assert (await team.http.get(f"/v1/endpoints/{created['id']}")).status_code == 404
    assert (await team.http.get("/v1/endpoints")).json()["total"] == 0
    # The name is free again once the old endpoint is gone.
    await team.create_endpoint(name="vllm-llama8b-h200")


async def test_hardware_catalog(team: TeamClient) -> None:
    catalog = (await team.http.get("/v1/hardware")).json()
    names = {hw["name"] for hw in catalog}
    assert {"A100-SXM-80GB", "H100-SXM", "H200-SXM", "B200", "L40S", "L4", "MI300X"} <= names
    h200 = next(hw for hw in catalog if hw["name"] == "H200-SXM")
    assert h200["memory_bandwidth_gbps"] == 4800 and h200["public"] is True
    added = await team.http.post(
        "/v1/hardware",
        json={
            "name": "RTX-6000-Ada",
            "vendor": "nvidia",
            "memory_gb": 48,
            "memory_bandwidth_gbps": 960,
            "bf16_tflops": 364,
            "power_w": 300,
        },
    )
    assert added.status_code == 201, added.text
    assert added.json()["public"] is False
    assert added.json()["kind"] == "gpu" and h200["kind"] == "gpu"
    one = await team.http.get(f"/v1/hardware/{added.json()['id']}")
    assert one.json()["name"] == "RTX-6000-Ada"
    clash = await team.http.post(
        "/v1/hardware",
        json={
            "name": "h200-sxm",
            "vendor": "x",
            "memory_gb": 1,
            "memory_bandwidth_gbps": 1,
            "bf16_tflops": 1,
            "power_w": 1,
        },
    )
    assert clash.status_code == 409


async def test_a_cpu_machine_is_hardware_an_endpoint_and_a_price_can_name(
    team: TeamClient,
) -> None:
    # A llama.cpp server on a two-socket CPU machine: one unit, priced per machine-hour.
    cpu = {
        "name": f"epyc-{uuid.uuid4().hex[:6]}",
        "kind": "cpu",
        "vendor": "amd",
        "memory_gb": 768,
        "memory_bandwidth_gbps": 920,
        "bf16_tflops": 12.5,
        "power_w": 720,
    }
    added = await team.http.post("/v1/hardware", json=cpu)
    assert added.status_code == 201, added.text
    assert added.json() == {
        **cpu,
        "id": added.json()["id"],
        "fp8_tflops": None,
        "public": False,
    }
    endpoint = await team.create_endpoint(
        engine="llamacpp", hardware=cpu["name"], gpu_count=1, usd_per_hour=None, provider="own"
    )
    assert endpoint["hardware"] == cpu["name"]
    price = await team.http.post(
        "/v1/prices",
        json={"provider": "own", "hardware": cpu["name"], "usd_per_gpu_hour": 1.1},
    )
    assert price.status_code == 201, price.text
    wrong_kind = await team.http.post("/v1/hardware", json={**cpu, "name": "x", "kind": "tpu"})
    assert wrong_kind.status_code == 422
    assert wrong_kind.json()["detail"] == "kind: 'tpu' is not one of: cpu, gpu"


def endpoint_body(**fields: Any) -> dict[str, Any]:
    return {
        "name": f"ep-{uuid.uuid4().hex[:6]}",
        "base_url": "http://192.0.2.5:8000/v1",
        "model": "m",
        **fields,
    }


async def test_an_unknown_hardware_name_gets_the_nearest_names(team: TeamClient) -> None:
    typo = await team.http.post("/v1/endpoints", json=endpoint_body(hardware="H100-SMX"))
    assert typo.status_code == 422
    assert typo.json()["errors"][0]["field"] == "hardware"
    detail = typo.json()["detail"]
    assert detail.startswith("hardware: unknown hardware 'H100-SMX': did you mean 'H100-SXM'")
    assert detail.endswith("add your own (a GPU or a CPU machine) with POST /v1/hardware")
    priced = await team.http.post(
        "/v1/prices",
        json={"provider": "p", "hardware": "mi300", "usd_per_gpu_hour": 2.0},
    )
    assert priced.status_code == 422
    assert "did you mean 'MI300X'?" in priced.json()["detail"]
    nothing_near = await team.http.post("/v1/endpoints", json=endpoint_body(hardware="zzzz"))
    assert "unknown hardware 'zzzz': GET /v1/hardware lists" in nothing_near.json()["detail"]


async def test_hosted_api_is_priced_per_token_and_one_way_only(team: TeamClient) -> None:
    hosted = await team.create_endpoint(
        name="hosted-mini",
        base_url="http://192.0.2.9/v1",
        hardware=None,
        usd_per_hour=None,
        usd_per_million_input_tokens=0.15,
        usd_per_million_output_tokens=0.60,
    )
    assert hosted["usd_per_million_input_tokens"] == 0.15
    assert hosted["usd_per_million_output_tokens"] == 0.60
    assert hosted["usd_per_hour"] is None

    half = await team.http.post(
        "/v1/endpoints",
        json={
            "name": "half-priced",
            "base_url": "http://h/v1",
            "model": "m",
            "usd_per_million_input_tokens": 0.15,
        },
    )
    assert half.status_code == 422, half.text
    assert "usd_per_million_output_tokens" in half.json()["detail"]

    both = await team.http.patch(f"/v1/endpoints/{hosted['id']}", json={"usd_per_hour": 3.0})
    assert both.status_code == 422, both.text
    assert "not both" in both.json()["detail"]


async def test_model_facts_and_a_precision_outside_the_list(team: TeamClient) -> None:
    created = await team.create_endpoint(
        name="facts", params_b=8, precision="fp8", kv_bytes_per_token=131072
    )
    assert (created["params_b"], created["precision"], created["kv_bytes_per_token"]) == (
        8,
        "fp8",
        131072,
    )
    wrong = await team.http.post(
        "/v1/endpoints",
        json={"name": "p", "base_url": "http://h/v1", "model": "m", "precision": "fp9"},
    )
    assert wrong.status_code == 422, wrong.text
    assert "bf16" in wrong.json()["detail"]
