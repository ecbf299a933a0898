"""`infercost up`'s first-start data, written through the core's repositories: what a user
then reads over the API with the saved key, a restart on other ports, and the two ways the
data dir and the database can disagree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.demo import Seeded, demo_endpoints
from cli.seed import seed
from infercost.settings import Settings
from tests.conftest import Api

pytestmark = pytest.mark.integration


def _endpoints(api: Api, key: str) -> dict[str, dict[str, Any]]:
    resp = httpx.get(
        f"{api.url}/v1/endpoints", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert resp.status_code == 200, resp.text
    return {e["name"]: e for e in resp.json()["items"]}


def test_seed_writes_what_the_api_serves_and_follows_the_ports(
    api_server: Api, service_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.from_env(service_env)  # the API's database and secret keys
    key_file = tmp_path / "default-team.key"

    first = seed(settings, tmp_path, demo_endpoints(9301, 9302), api_server.url)
    assert first.team_key is not None
    assert key_file.read_text().strip() == first.team_key
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert "created team 'default'" in capsys.readouterr().out
    served = _endpoints(api_server, first.team_key)  # the saved key works on the API
    assert set(served) == {"sim-fixed", "sim-gpu"}
    assert {name: e["id"] for name, e in served.items()} == first.endpoint_ids
    fixed, gpu = served["sim-fixed"], served["sim-gpu"]
    assert (fixed["base_url"], fixed["metrics_urls"]) == ("http://127.0.0.1:9301/v1", [])
    assert (fixed["model"], fixed["hardware"], fixed["usd_per_hour"]) == (
        "sim-model",
        "H200-SXM",
        3.5,
    )
    assert gpu["base_url"] == "http://127.0.0.1:9302/v1"
    assert gpu["metrics_urls"] == ["http://127.0.0.1:9302/metrics"]
    # 8B bf16, Llama-3-like: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes.
    assert (gpu["params_b"], gpu["precision"], gpu["kv_bytes_per_token"]) == (8, "bf16", 131072)

    # A restart on other ports: the same team, key and endpoints, pointed at the new ports.
    again = seed(settings, tmp_path, demo_endpoints(9303, 9304), api_server.url)
    assert again == first
    out = capsys.readouterr().out
    assert "created team" not in out
    assert "pointed 'sim-fixed' at http://127.0.0.1:9303/v1" in out
    moved = _endpoints(api_server, first.team_key)
    assert moved["sim-fixed"]["base_url"] == "http://127.0.0.1:9303/v1"
    assert moved["sim-gpu"]["metrics_urls"] == ["http://127.0.0.1:9304/metrics"]

    # A key the database does not know (another data dir's): nothing is written, up goes on.
    key_file.write_text("ic_0123456789ab_" + "x" * 43 + "\n")
    assert seed(settings, tmp_path, demo_endpoints(9305, 9306), api_server.url) == Seeded()
    assert "does not accept the key" in capsys.readouterr().err
    # No key at all while the team exists: its key cannot be shown again, so none is made.
    key_file.unlink()
    assert seed(settings, tmp_path, demo_endpoints(9305, 9306), api_server.url) == Seeded()
    assert "already exists" in capsys.readouterr().err
    assert not key_file.exists()
    assert _endpoints(api_server, first.team_key)["sim-fixed"]["base_url"].endswith(":9303/v1")
