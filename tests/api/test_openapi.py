"""The OpenAPI document a portal builds on: every route's problem+json errors, described request
bodies that refuse unknown fields, docs served without a CDN, one status for schema errors, and
a typed client generated from the document that runs the walkthrough's core calls."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from sim.process import SimProcess
from tests.api.openapi_snapshot import SNAPSHOT, built_document, differences
from tests.conftest import Api, TeamClient

pytestmark = pytest.mark.integration

PROBLEM_REF = "#/components/schemas/Problem"
#: The RFC 9457 members every problem carries, and the extensions this API adds.
PROBLEM_MEMBERS = {"type", "title", "status", "detail", "instance"}
PROBLEM_EXTENSIONS = {"errors", "limit", "valid_names"}
WRITES = {"post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def document(api_server: Api) -> dict[str, Any]:
    """The live API's OpenAPI document."""
    response = httpx.get(f"{api_server.url}/schema/openapi.json", timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) for every documented operation."""
    return [
        (method, path, op)
        for path, item in document["paths"].items()
        for method, op in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def expected_errors(method: str, path: str, op: dict[str, Any]) -> set[int]:
    """What a route must declare, read off its method, path and body alone."""
    if not path.startswith("/v1/"):
        return {400}
    statuses = {400, 401, 403, 429, 503}
    # Ids in the path are UUIDs (`{job_id}`, `{run_id}`, ...); names are not looked up as ids.
    if re.search(r"\{\w+_id\}", path):
        statuses.add(404)
    if "requestBody" in op:
        statuses |= {413, 422}
    if method in WRITES:
        statuses.add(409)
    return statuses


def test_every_route_declares_its_errors_as_problem_json(document: dict[str, Any]) -> None:
    ops = operations(document)
    assert len(ops) >= 40, "the document lost routes"
    for method, path, op in ops:
        declared = {int(code) for code in op["responses"] if int(code) >= 400}
        missing = expected_errors(method, path, op) - declared
        assert not missing, f"{method.upper()} {path} does not declare {sorted(missing)}"
        for code in declared:
            response = op["responses"][str(code)]
            content = response.get("content", {})
            assert list(content) == ["application/problem+json"], (method, path, code, content)
            assert content["application/problem+json"]["schema"] == {"$ref": PROBLEM_REF}
            assert response["description"], (method, path, code)


def test_the_route_table_and_the_document_agree(
    document: dict[str, Any], service_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every route the app serves (docs pages aside) is in the document, with its errors."""
    from litestar.routes import HTTPRoute

    from api.app import create_app
    from infercost.settings import Settings

    for name, value in service_env.items():
        monkeypatch.setenv(name, value)
    app = create_app(Settings.from_env())
    served = {
        (method.lower(), re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path))
        for route in app.routes
        if isinstance(route, HTTPRoute) and not route.path.startswith(("/schema", "/docs"))
        for handler in route.route_handlers
        if handler.include_in_schema
        for method in handler.http_methods
        if method not in ("HEAD", "OPTIONS")
    }
    documented = {(method, path) for method, path, _ in operations(document)}
    assert served == documented
    assert ("get", "/v1/jobs/{job_id}") in served


def test_the_document_is_the_recorded_one(service_env: dict[str, str]) -> None:
    """The interface changes only on purpose: a refactor leaves the document as recorded
    (tests/api/openapi_snapshot.py says how to record a change that means to change it)."""
    built = json.loads(built_document(service_env))
    recorded = json.loads(SNAPSHOT.read_text())
    assert differences(recorded, built) == []
    assert built == recorded


def test_the_snapshot_check_names_what_changed() -> None:
    recorded = json.loads(SNAPSHOT.read_text())
    built = json.loads(SNAPSHOT.read_text())
    built["paths"]["/v1/jobs"]["post"]["summary"] = "something else"
    del built["components"]["schemas"]["RunSummary"]
    built["components"]["schemas"]["Extra"] = {"type": "object"}
    assert differences(recorded, built) == [
        "operation changed: POST /v1/jobs",
        "schema removed: RunSummary",
        "schema added: Extra",
    ]


def test_every_process_serves_the_same_document(service_env: dict[str, str]) -> None:
    """Replicas (and the generated clients of those who read them) see one document: string
    hashing, which differs per process, must not decide what a component says. Hash seed 5
    once dropped the description of `When`, which two fields declare (the create and the read
    body)."""
    documents = [built_document({**service_env, "PYTHONHASHSEED": seed}) for seed in ("0", "5")]
    assert documents[0] == documents[1]
    assert json.loads(documents[0])["components"]["schemas"]["When"]["description"]


def test_one_problem_schema_with_the_fields_the_api_sends(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    problem = schemas["Problem"]
    assert set(problem["required"]) == PROBLEM_MEMBERS
    assert set(problem["properties"]) == PROBLEM_MEMBERS | PROBLEM_EXTENSIONS
    assert all(p.get("description") for p in problem["properties"].values())
    # Litestar's own error shape ({status_code, detail, extra}) is gone from the document.
    assert "status_code" not in json.dumps(document["paths"])


def check_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """A real error answer has the documented shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = dict(response.json())
    assert PROBLEM_MEMBERS <= set(body) <= PROBLEM_MEMBERS | PROBLEM_EXTENSIONS, body
    assert body["status"] == status
    assert body["instance"] == response.request.url.path
    for error in body.get("errors", []):
        assert set(error) == {"field", "message"}
    return body


async def test_real_errors_have_the_documented_shape(
    team: TeamClient, api_server: Api, admin: httpx.AsyncClient
) -> None:
    endpoint = await team.create_endpoint()
    async with httpx.AsyncClient(base_url=api_server.url) as anonymous:
        check_problem(await anonymous.get("/v1/jobs"), 401)
    check_problem(await admin.get("/v1/jobs"), 403)
    check_problem(await team.http.get(f"/v1/jobs/{uuid.uuid4()}"), 404)
    taken = await team.http.post(
        "/v1/endpoints",
        json={"name": endpoint["name"], "base_url": "http://127.0.0.1:9/v1", "model": "m"},
    )
    check_problem(taken, 409)
    check_problem(await team.http.post("/v1/endpoints", json={"name": "x"}), 422)
    malformed = await team.http.post(
        "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    check_problem(malformed, 400)


def test_request_bodies_describe_every_field_and_refuse_unknown_ones(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]

    def refs(node: Any) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                found.add(node["$ref"].rsplit("/", 1)[1])
            for value in node.values():
                found |= refs(value)
        elif isinstance(node, list):
            for value in node:
                found |= refs(value)
        return found

    todo = set().union(*(refs(op.get("requestBody")) for _, _, op in operations(document)))
    bodies: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in bodies:
            bodies.add(name)
            todo |= refs(schemas[name]) - bodies
    for name in ("JobCreate", "Load", "Workload", "EndpointCreate", "PriceCreate",
                 "EstimateCreate", "WebhookCreate", "Slo"):  # fmt: skip
        assert name in bodies
    undocumented = [
        f"{name}.{field}"
        for name in sorted(bodies)
        for field, prop in schemas[name].get("properties", {}).items()
        if not prop.get("description") or "examples" not in prop
    ]
    assert undocumented == [], "fields without a description and an example"
    lenient = [n for n in sorted(bodies) if schemas[n].get("additionalProperties") is not False]
    assert lenient == [], "request bodies that do not say they refuse unknown fields"
    # Units: a field named for its unit says it in its description.
    for name in sorted(bodies):
        for field, prop in schemas[name]["properties"].items():
            text = prop["description"]
            if field.endswith("_ms") or name == "SloLimits":
                assert "ms" in text, (name, field, text)
            if field.endswith("_s"):
                assert "second" in text.lower() or "/s" in text, (name, field, text)
            if "usd" in field:
                assert "USD" in text, (name, field, text)
    run = schemas["RunSummary"]["properties"]
    assert [f for f, p in run.items() if not p.get("description")] == []
    assert "tokens/s" in run["output_tokens_per_s"]["description"]
    assert "USD" in run["cost"]["description"]


class _Assets(HTMLParser):
    """Every script src and link href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in (("script", "src"), ("link", "href"), ("img", "src")) and value:
                self.urls.append(value)


@pytest.mark.parametrize("page", ["/docs", "/schema"])
async def test_docs_load_nothing_from_outside(api_server: Api, page: str) -> None:
    async with httpx.AsyncClient(base_url=api_server.url, timeout=30) as http:
        response = await http.get(page)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/html")
        parser = _Assets()
        parser.feed(response.text)
        assert len(parser.urls) >= 3, parser.urls  # script, preset, style sheet (and icon)
        for url in parser.urls:
            assert url.startswith("/") and not url.startswith("//"), url
            asset = await http.get(url)
            assert asset.status_code == 200, url
            assert len(asset.content) > 100, url
        # The page embeds the document itself: nothing to fetch for the spec either.
        assert '"openapi":"3.1.0"' in response.text.replace(" ", "")
        assert "https://" not in response.text.split("<body", 1)[0]


async def test_docs_render_in_a_browser_without_the_internet(api_server: Api) -> None:
    """Swagger UI draws the document (OpenAPI 3.1) with every request outside loopback
    refused, as on an air-gapped install."""
    from playwright.async_api import Route, async_playwright

    from tests.integration.test_reports import ARTIFACTS, _chromium_or_skip

    errors: list[str] = []
    outside: list[str] = []

    async def loopback_only(route: Route) -> None:
        host = httpx.URL(route.request.url).host
        if host in ("127.0.0.1", "localhost"):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(_chromium_or_skip()), args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.route("**/*", loopback_only)
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(api_server.url + "/docs", wait_until="load")
            await page.wait_for_selector(".opblock", timeout=30_000)
            title = await page.inner_text(".info .title")
            operations = await page.locator(".opblock").count()
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "docs.png"))
        finally:
            await browser.close()
    assert "infercost" in title
    assert operations >= 40
    assert outside == [] and errors == [], (outside, errors)


async def test_schema_errors_share_one_status_and_say_what_is_valid(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    job = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 2},
    }
    missing_top = {k: v for k, v in job.items() if k != "load"}
    missing_nested = {**job, "load": {"levels": [1]}}
    missing_levels = {**job, "load": {"mode": "concurrency"}}
    statuses = {
        (await team.submit(body)).status_code
        for body in (missing_top, missing_nested, missing_levels)
    }
    assert statuses == {422}

    top_typo = check_problem(await team.submit({**job, "slos": {}}), 422)
    assert top_typo["errors"][0]["field"] == "body"
    assert "unknown field 'slos'" in top_typo["detail"]
    assert "endpoint_id, workload, load, slo" in top_typo["detail"]

    truncated = await team.http.post(
        "/v1/jobs", content=b'{"a": 1', headers={"Content-Type": "application/json"}
    )
    assert check_problem(truncated, 400)["detail"].startswith("the body is not valid JSON: ")

    since = check_problem(await team.http.get("/v1/comparisons", params={"since": "May"}), 422)
    assert "2026-12-01T00:00:00Z" in since["detail"]


async def test_csv_names_its_charset_once(team: TeamClient) -> None:
    response = await team.http.get("/v1/comparisons", headers={"Accept": "text/csv"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"


@pytest.fixture(scope="module")
def client_package(document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A typed client generated from the live document by openapi-python-client (offline,
    a few seconds), imported under a name of its own."""
    root = tmp_path_factory.mktemp("client")
    spec = root / "openapi.json"
    spec.write_text(json.dumps(document))
    name = f"infercost_client_{uuid.uuid4().hex[:6]}"
    out = root / name
    tool = Path(sys.executable).with_name("openapi-python-client")
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(tool), "generate", "--meta", "none", "--path", str(spec), "--output-path", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Warnings only for the dataset upload (a file body) and the SVG charts, not models.
    assert "Unable to parse" not in output and "duplicate" not in output, output
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(root))


async def test_a_generated_client_runs_the_walkthrough(
    client_package: Any, api_server: Api, team: TeamClient, sim: SimProcess, worker: Any
) -> None:
    pkg = client_package.__name__
    endpoints = importlib.import_module(f"{pkg}.api.endpoints.v1_endpoints_create_endpoint")
    submit = importlib.import_module(f"{pkg}.api.jobs.v1_jobs_submit_job")
    read_job = importlib.import_module(f"{pkg}.api.jobs.v1_jobs_job_id_get_job")
    list_runs = importlib.import_module(f"{pkg}.api.jobs.v1_jobs_job_id_runs_list_runs")
    models = importlib.import_module(f"{pkg}.models")

    client = client_package.AuthenticatedClient(base_url=api_server.url, token=team.key)
    created = await endpoints.asyncio_detailed(
        client=client,
        body=models.EndpointCreate(
            name=f"sim-{uuid.uuid4().hex[:6]}",
            base_url=sim.openai_base_url,
            model="sim-model",
            hardware="H200-SXM",
            usd_per_hour=3.5,
        ),
    )
    assert created.status_code == 201, created.content
    endpoint = created.parsed
    assert isinstance(endpoint, models.EndpointRead)

    body = models.JobCreate.from_dict(
        {
            "endpoint_id": str(endpoint.id),
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 8}},
            "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 6},
            "slo": {"ttft_ms": {"p95": 5000}},
        }
    )
    accepted = await submit.asyncio_detailed(client=client, body=body)
    assert accepted.status_code == 202, accepted.content
    job = accepted.parsed
    assert isinstance(job, models.JobSubmitted)
    # 6 requests a level: the plan already says the levels will be too thin for a p99.
    assert [(w.code, w.levels) for w in job.warnings] == [("few_requests", [1, 2])]

    deadline = time.monotonic() + 120
    while job.status in ("queued", "running") and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
        job = await read_job.asyncio(client=client, job_id=job.id)
        assert isinstance(job, models.JobRead)
    assert job.status == "succeeded", job.error

    runs = await list_runs.asyncio(client=client, job_id=job.id)
    assert isinstance(runs, list) and len(runs) == 2
    assert [run.level for run in runs] == [1.0, 2.0]
    for run in runs:
        assert run.requests.total == 6
        assert run.requests.succeeded == 6
        # The simulator's fixed timings: TTFT about 50 ms, so the figures are real ones.
        assert run.ttft_ms.p50 is not None and run.ttft_ms.p50 >= 45
        assert run.cost.usd_per_hour == 3.5

    # An error comes back as the typed Problem, not as an untyped dict.
    missing = await read_job.asyncio_detailed(client=client, job_id=uuid.uuid4())
    assert missing.status_code == 404
    assert isinstance(missing.parsed, models.Problem)
    assert missing.parsed.status == 404
