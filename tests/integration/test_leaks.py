"""No planted key leaves: an upstream on loopback that echoes the endpoint's key every way
(a 401 JSON error quoting the Authorization header, an HTML page, a plain-text refusal, an
error event in a 200 stream, a redirect whose URL holds the key, headers echoing it) is
checked and benchmarked; then every API response about it, the webhook body received, the
service logs, every Redis key and value and a pg_dump of the database are searched for every
form the key could take (written out here by hand, independently of the redactor). The
upstream's HTML page is never quoted back: its marker is searched for too."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from redis.asyncio import Redis

from tests.conftest import ARTIFACTS, REDIS, TeamClient
from tests.integration.test_webhook_jobs import create_webhook, receiver, wait_delivery

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

#: The planted key: '/' and '+' make its URL-encoded and JSON forms differ from it.
KEY = f"sk-leak/{secrets.token_hex(8)}+{secrets.token_hex(8)}"
#: Text only the upstream's internal page holds.
MARKER = f"INTERNAL-ADMIN-PAGE-{secrets.token_hex(6)}"


def planted_forms() -> dict[str, bytes]:
    """Every form of the key searched for, each spelled out independently."""
    basic = base64.b64encode(f"gateway-user:{KEY}".encode()).decode()
    return {
        "raw": KEY.encode(),
        "json-escaped": KEY.replace("/", "\\/").encode(),
        "url-encoded": quote(KEY, safe="").encode(),
        "url-encoded lower": quote(KEY, safe="").lower().encode(),
        "form-encoded": quote_plus(KEY, safe="").encode(),
        "base64": base64.b64encode(KEY.encode()).rstrip(b"="),
        "basic": basic.encode(),
        "hex": KEY.encode().hex().encode(),
        "first 12 characters": KEY[:12].encode(),
        "the internal page": MARKER.encode(),
    }


def _page(auth: str) -> bytes:
    basic = base64.b64encode(f"gateway-user:{KEY}".encode()).decode()
    return (
        f"<!DOCTYPE html><html><head><title>401 {MARKER}</title></head><body>"
        f"<h1>Unauthorized</h1><p>{MARKER}: you sent {auth}</p>"
        f"<p>basic={basic} url={quote(KEY, safe='')}</p></body></html>"
    ).encode()


@contextmanager
def echoing_upstream() -> Iterator[str]:
    """An OpenAI-looking upstream that answers every request with the key it was sent, in
    a different way each time; yields its base URL."""
    count = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, kind: str, body: bytes, **headers: str) -> None:
            auth = self.headers.get("Authorization", "")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Echo-Authorization", auth)
            self.send_header("WWW-Authenticate", f'Bearer error="invalid_token", key="{KEY}"')
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            if self.path.endswith("/models"):
                error = {"error": {"message": f"Incorrect API key provided: {auth}", "code": 401}}
                self._answer(401, "application/json", json.dumps(error).encode())
            else:
                self._answer(401, "text/html; charset=utf-8", _page(auth))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            auth = self.headers.get("Authorization", "")
            n = count["n"]
            count["n"] += 1
            basic = base64.b64encode(f"gateway-user:{KEY}".encode()).decode()
            if self.path.endswith("/tokenize"):
                self._answer(401, "text/html", _page(auth))
                return
            match n % 6:
                case 0:
                    error = {"error": {"message": f"invalid key {auth} (Basic {basic})"}}
                    self._answer(401, "application/json", json.dumps(error).encode())
                case 1:
                    self._answer(401, "text/html; charset=utf-8", _page(auth))
                case 2:
                    event = {"error": {"message": f"token {KEY} expired; sent {auth}"}}
                    body = f"event: error\ndata: {json.dumps(event)}\n\n".encode()
                    self._answer(200, "text/event-stream", body)
                case 3:
                    text = f"forbidden: {auth} basic={basic} url={quote(KEY, safe='')}"
                    self._answer(403, "text/plain", text.encode())
                case 4:
                    where = f"http://127.0.0.1:1/login?api_key={quote(KEY, safe='')}"
                    self._answer(302, "text/plain", b"", Location=where)
                case _:
                    self._answer(200, "application/json", json.dumps({"error": KEY}).encode())

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def leaks(where: str, data: bytes) -> list[str]:
    """Each planted form found in `data`, named with where it was found."""
    return [f"{where}: {name}" for name, form in planted_forms().items() if form in data]


async def redis_contents(url: str = REDIS) -> bytes:
    """Every key and value in the Redis the services share, as one blob."""
    redis = Redis.from_url(url)
    parts: list[bytes] = []
    try:
        async for key in redis.scan_iter(count=1000):
            parts.append(key)
            kind = (await redis.type(key)).decode()
            if kind == "string":
                parts.append((await redis.get(key)) or b"")
            elif kind == "list":
                parts.extend(await redis.lrange(key, 0, -1))
            elif kind == "hash":
                for field, value in (await redis.hgetall(key)).items():
                    parts += [field, value]
            elif kind == "set":
                parts.extend(await redis.smembers(key))
            elif kind == "zset":
                parts.extend(await redis.zrange(key, 0, -1))
            elif kind == "stream":
                for _id, fields in await redis.xrange(key):
                    for field, value in fields.items():
                        parts += [field, value]
    finally:
        await redis.aclose()
    return b"\n".join(parts)


def pg_dump(database_url: str) -> bytes:
    """The whole test database as SQL (pg_dump, data and schema)."""
    url = database_url.replace("postgresql+asyncpg://", "postgresql://")
    done = subprocess.run(["pg_dump", "--no-owner", url], capture_output=True, check=True)
    return done.stdout


async def test_a_key_echoed_every_way_never_comes_back(team: TeamClient, database_url: str) -> None:
    found: list[str] = []
    with echoing_upstream() as base_url, receiver(200) as hooks:
        endpoint = await team.create_endpoint(base_url=base_url, api_key=KEY, engine="vllm")
        webhook = await create_webhook(team, hooks.url, ["job.finished"])

        checked = await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")
        assert checked.status_code == 200, checked.text
        check = checked.json()
        found += leaks("check", checked.content)
        # The advice stays: a refused key is named as such.
        assert check["ok"] is False
        assert "set the endpoint's api_key" in check["summary"], check["summary"]
        assert "HTTP 401" in check["summary"]

        submitted = await team.submit(
            {
                "endpoint_id": endpoint["id"],
                "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
                "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 12},
                "force": True,
            }
        )
        assert submitted.status_code == 202, submitted.text
        job = await team.wait_job(submitted.json()["id"])
        assert job["status"] == "failed"
        assert job["error"], job
        (got,) = await hooks.wait_for(1)
        found += leaks("webhook body", got.body)
        delivery = await wait_delivery(team, webhook["id"], "delivered")
        assert delivery["attempts"] == 1

    job_id = job["id"]
    run_ids = [r["id"] for r in job["runs"]]
    assert run_ids, job
    reads: dict[str, tuple[str, dict[str, str]]] = {
        "job": (f"/v1/jobs/{job_id}", {}),
        "jobs": ("/v1/jobs", {}),
        "runs": (f"/v1/jobs/{job_id}/runs", {}),
        "export": (f"/v1/jobs/{job_id}/export", {}),
        "report": (f"/v1/jobs/{job_id}/report", {"Accept": "text/html"}),
        "endpoint": (f"/v1/endpoints/{endpoint['id']}", {}),
        "endpoints": ("/v1/endpoints", {}),
        "deliveries": (f"/v1/webhooks/{webhook['id']}/deliveries", {}),
        "status csv": ("/v1/status", {"Accept": "text/csv"}),
        "status html": ("/v1/status", {"Accept": "text/html"}),
        "comparisons csv": ("/v1/comparisons", {"Accept": "text/csv"}),
    }
    for run_id in run_ids:
        reads[f"run {run_id}"] = (f"/v1/runs/{run_id}", {})
        reads[f"samples {run_id}"] = (f"/v1/runs/{run_id}/requests", {})
        reads[f"samples csv {run_id}"] = (f"/v1/runs/{run_id}/requests", {"Accept": "text/csv"})
    for name, (path, headers) in reads.items():
        response = await team.http.get(path, headers=headers)
        assert response.status_code == 200, (name, response.status_code, response.text[:300])
        found += leaks(name, response.content)

    # What the job says is still useful: the refusal, in the server's own words, masked.
    assert "api_key" in job["error"] or "[redacted]" in job["error"], job["error"]

    found += leaks("redis", await redis_contents())
    found += leaks("pg_dump", await asyncio.to_thread(pg_dump, database_url))
    for log in ("api", "worker", "maintenance"):
        path = ARTIFACTS / f"{log}.log"
        if path.exists():
            found += leaks(f"{log} log", path.read_bytes())
    assert found == []
