"""Values of another type than the document names are refused, never converted; OPTIONS and
405 answers list every method of their path."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


def _refused(response_json: dict[str, object], field: str) -> str:
    """The message of the one refused field, checked to be `field`."""
    errors = response_json["errors"]
    assert isinstance(errors, list) and [e["field"] for e in errors] == [field], response_json
    return str(errors[0]["message"])


async def test_a_number_is_not_a_time_in_a_body(team: TeamClient) -> None:
    before = (await team.http.get("/v1/prices")).json()["total"]
    body = {"provider": "acme", "hardware": "H200-SXM", "usd_per_gpu_hour": 3.5}
    response = await team.http.post("/v1/prices", json={**body, "effective_from": 0})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "got `int`" in _refused(response.json(), "effective_from")
    # Not read as 1970 and stored: the book holds what it held.
    assert (await team.http.get("/v1/prices")).json()["total"] == before
    ok = await team.http.post("/v1/prices", json={**body, "effective_from": "2026-12-01T00:00:00Z"})
    assert ok.status_code == 201, ok.text
    assert ok.json()["effective_from"].startswith("2026-12-01T00:00:00")


async def test_text_is_not_a_number_in_a_body(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    response = await team.http.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"usd_per_hour": "2.5"}
    )
    assert response.status_code == 422, response.text
    assert "got `str`" in _refused(response.json(), "usd_per_hour")
    assert (await team.http.get(f"/v1/endpoints/{endpoint['id']}")).json()["usd_per_hour"] == 3.5
    # A JSON integer where a number is due is a number.
    ok = await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"usd_per_hour": 2})
    assert ok.status_code == 200, ok.text
    assert ok.json()["usd_per_hour"] == 2.0
    # And a whole-valued JSON number where an integer is due is that integer (JSON has one
    # number type); a fraction is not.
    whole = await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"gpu_count": 2.0})
    assert whole.status_code == 200, whole.text
    assert whole.json()["gpu_count"] == 2
    half = await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"gpu_count": 2.5})
    assert half.status_code == 422, half.text


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({"until": "0.5"}, "until", "RFC3339"),
        ({"since": "1700000000"}, "since", "RFC3339"),
        ({"limit": "1.5"}, "limit", "Expected `int`"),
        ({"level": "ten"}, "level", "Expected `float`"),
        ({"level": "nan"}, "level", "Expected `float`"),
    ],
)
async def test_query_values_of_another_type_are_refused(
    team: TeamClient, query: dict[str, str], field: str, words: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.http.get(f"/v1/endpoints/{endpoint['id']}/history", params=query)
    assert response.status_code == 422, response.text
    assert words in _refused(response.json(), field)


async def test_booleans_in_a_query_are_true_or_false(team: TeamClient) -> None:
    refused = await team.http.get("/v1/comparisons", params={"slo_passed": "1"})
    assert refused.status_code == 422, refused.text
    assert "true or false" in _refused(refused.json(), "slo_passed")
    for value in ("true", "false"):
        ok = await team.http.get("/v1/comparisons", params={"slo_passed": value})
        assert ok.status_code == 200, ok.text


async def test_query_values_of_their_type_are_read(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    ok = await team.http.get(
        f"/v1/endpoints/{endpoint['id']}/history",
        params={
            "since": "2026-01-01T00:00:00Z",
            "until": "2026-12-01T01:00:00+01:00",
            "limit": "10",
            "level": "2.5",
        },
    )
    assert ok.status_code == 200, ok.text


async def test_options_lists_every_method_of_the_path(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    expected = {
        "/v1/endpoints": "GET, OPTIONS, POST",
        f"/v1/endpoints/{endpoint['id']}": "DELETE, GET, OPTIONS, PATCH",
        "/v1/schedules": "GET, OPTIONS, POST",
        f"/v1/datasets/{uuid.uuid4()}": "DELETE, GET, OPTIONS",
    }
    for path, allow in expected.items():
        response = await team.http.options(path)
        assert response.status_code == 204, (path, response.text)
        assert response.headers["allow"] == allow, path


async def test_method_not_allowed_lists_the_methods(team: TeamClient) -> None:
    response = await team.http.put("/v1/endpoints", json={})
    assert response.status_code == 405, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert sorted(m.strip() for m in response.headers["allow"].split(",")) == [
        "GET",
        "OPTIONS",
        "POST",
    ]


async def test_the_document_states_what_parameters_accept(team: TeamClient) -> None:
    document = (await team.http.get("/schema/openapi.json")).json()

    def schema(path: str, name: str) -> dict[str, object]:
        (found,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
        return dict(found["schema"])

    assert schema("/v1/status", "window")["enum"] == ["24h", "72h", "7d", "30d"]
    # A bound Litestar left off an optional parameter, and the NUL no URL text may hold.
    price = schema("/v1/jobs/{job_id}", "usd_per_hour")["oneOf"]
    assert {"type": "number", "minimum": 0} in price  # type: ignore[operator]
    sort = schema("/v1/status", "sort")["oneOf"]
    assert {"type": "string", "pattern": "^[^\\u0000]*$"} in sort  # type: ignore[operator]
    compare = schema("/v1/reports/compare", "job_id")
    assert (compare["minItems"], compare["maxItems"]) == (2, 8)
    # A bound msgspec checks on an optional body field, which Litestar left out.
    components = document["components"]["schemas"]
    fp8 = components["HardwareCreate"]["properties"]["fp8_tflops"]["oneOf"]
    assert {"type": "number", "exclusiveMinimum": 0} in fp8
    levels = components["Load"]["properties"]["levels"]["oneOf"][0]
    assert (levels["minItems"], levels["maxItems"], levels["items"]["minimum"]) == (1, 64, 0.001)
    nul = await team.http.get("/v1/status", params={"sort": "a\x00b"})
    assert nul.status_code == 400, nul.text
