"""A job may name a workload preset instead of lengths and an SLO (docs/cli-and-api.md, Job)."""

from __future__ import annotations

import pytest

from infercost.planning.presets import get_preset
from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


async def test_a_preset_fills_the_lengths_and_slo_left_out(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    chatbot = get_preset("interactive-chatbot")
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"preset": "interactive-chatbot", "output_tokens": {"mean": 32}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 1},
        }
    )
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["workload"]["preset"] == "interactive-chatbot"
    assert job["workload"]["input_tokens"]["mean"] == chatbot.input_tokens["mean"]
    assert job["workload"]["input_tokens"]["std"] == chatbot.input_tokens["std"]
    # What the job gave wins over the preset.
    assert job["workload"]["output_tokens"]["mean"] == 32
    assert job["slo"] == chatbot.default_slo()
    await team.http.post(f"/v1/jobs/{job['id']}/cancel")


async def test_an_unknown_preset_lists_the_known_ones(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"preset": "chatty"},
            "load": {"mode": "concurrency", "levels": [1]},
        }
    )
    assert response.status_code == 422, response.text
    assert "interactive-chatbot" in response.json()["detail"]
