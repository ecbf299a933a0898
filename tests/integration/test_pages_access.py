"""Pages for people, end to end on an API of its own (the suite's database and keys), with
INFERCOST_FRAME_ANCESTORS naming one loopback "portal" origin and single sign-on pointed at a
local OpenID Connect issuer the test starts (a discovery document and a key set for an RSA
key it generates).

- Share links open exactly their page (a report, a comparison, the status board) with no
  key, in httpx and in headless Chromium; revoked, expired or altered links do not; the
  database never holds a token.
- A browser signs in once with a team key (HttpOnly, Secure, SameSite cookie; CSRF-safe
  forms), then opens the same pages; signed out, it is sent to sign in again.
- A portal on the allowed origin frames a shared page; one on another origin is refused by
  Chromium (the CSP says frame-ancestors), and JSON is never frameable.
- A token from the local issuer reads its team's jobs and no one else's; a wrong audience,
  an expired token or one signed by another key is a 401 that says which.

Screenshots: test-artifacts/shared-report.png, shared-board.png, signed-in-compare.png,
portal-allowed.png, portal-refused.png.
"""

from __future__ import annotations

import html
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.api.test_status import run
from tests.conftest import ARTIFACTS, Api, TeamClient, running_api
from tests.integration.test_reports import _chromium_or_skip

pytestmark = pytest.mark.integration

AUDIENCE = "infercost-pages-test"


@dataclass
class Issuer:
    """A local OpenID Connect issuer: its URL, the key it publishes (kid k1) and another key
    it does not publish."""

    url: str
    key: rsa.RSAPrivateKey
    other: rsa.RSAPrivateKey
    fetched: dict[str, int]

    def token(self, key: rsa.RSAPrivateKey | None = None, kid: str = "k1", **claims: Any) -> str:
        """A signed JWT: issuer, audience and a 5-minute life unless `claims` say otherwise."""
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "someone", "iat": now, "exp": now + 300}
        body.update(claims)
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid})


def _plain(page: str) -> str:
    """A page's text without the line-break hints names carry (<wbr> after a dot)."""
    return page.replace("<wbr>", "")


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    """The issuer on a loopback port, serving discovery and JWKS documents."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    documents: dict[str, bytes] = {}
    fetched: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched[self.path] = fetched.get(self.path, 0) + 1
            body = documents.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server, url = _serve(Handler)
    documents["/.well-known/openid-configuration"] = json.dumps(
        {"issuer": url, "jwks_uri": f"{url}/jwks"}
    ).encode()
    documents["/jwks"] = json.dumps(
        {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
    ).encode()
    try:
        yield Issuer(url, key, other, fetched)
    finally:
        server.shutdown()


def _portal() -> tuple[ThreadingHTTPServer, str]:
    """A portal page on a loopback origin of its own: /frame?src=URL frames URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            src = parse_qs(urlsplit(self.path).query).get("src", [""])[0]
            page = (
                "<!DOCTYPE html><title>portal</title><h1>Portal</h1>"
                f'<iframe id="embedded" src="{html.escape(src)}" width="1200" height="700">'
                "</iframe>"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    return _serve(Handler)


@dataclass
class Portals:
    allowed: str
    refused: str


@pytest.fixture(scope="module")
def portals() -> Iterator[Portals]:
    """Two portal origins: one INFERCOST_FRAME_ANCESTORS lists, one it does not."""
    allowed, allowed_url = _portal()
    refused, refused_url = _portal()
    try:
        yield Portals(allowed_url, refused_url)
    finally:
        allowed.shutdown()
        refused.shutdown()


@pytest.fixture(scope="module")
def pages_api(service_env: dict[str, str], issuer: Issuer, portals: Portals) -> Iterator[Api]:
    """An API on the suite's database and keys, framable by the allowed portal, taking
    tokens from the local issuer."""
    env = {
        **service_env,
        "INFERCOST_FRAME_ANCESTORS": portals.allowed,
        "INFERCOST_OIDC_ISSUER": issuer.url,
        "INFERCOST_OIDC_AUDIENCE": AUDIENCE,
    }
    with running_api(env, "pages-api") as api:
        yield api


@dataclass
class Pages:
    """A team with two finished jobs on two endpoints, both watched, and its key."""

    team: TeamClient
    jobs: list[str]
    names: list[str]


@pytest.fixture
async def pages(team: TeamClient, db: asyncpg.Connection) -> Pages:
    names = [f"pages-{uuid.uuid4().hex[:6]}.h200", f"pages-{uuid.uuid4().hex[:6]}.l4"]
    jobs = []
    for index, name in enumerate(names):
        endpoint = await team.create_endpoint(name=name, model="m8b")
        await db.execute(
            "INSERT INTO schedules (id, team_id, endpoint_id, template, interval_s, timezone,"
            " created_at) VALUES (gen_random_uuid(), $1, $2, '{}', 10800, 'UTC', now())",
            uuid.UUID(team.team_id),
            uuid.UUID(endpoint["id"]),
        )
        job, _ = await run(db, team, endpoint, ago=timedelta(hours=1), ttft=100.0 * (index + 1))
        jobs.append(job)
    return Pages(team, jobs, names)


async def _share(team: TeamClient, api: Api | None = None, **body: Any) -> dict[str, Any]:
    """Make a share through `api` (its links are on that API's address)."""
    response = await team.http.post(f"{api.url if api else ''}/v1/shares", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_share_links_open_exactly_their_page(
    pages_api: Api, pages: Pages, new_team: Callable[..., Any], db: asyncpg.Connection
) -> None:
    team = pages.team
    report = await _share(team, page="report", job_ids=[pages.jobs[0]], label="for the chat")
    compare = await _share(team, page="comparison", job_ids=pages.jobs, expires_in_s=3600)
    board = await _share(team, page="status", window="24h")
    assert report["state"] == "active" and report["created_by"].startswith("key ic_")
    assert report["path"] == f"/v1/jobs/{pages.jobs[0]}/report"
    # The URL is on the address the request came in on (no INFERCOST_PUBLIC_URL here).
    base = str(team.http.base_url).rstrip("/")
    assert report["url"] == f"{base}/shared/{report['token']}"

    async with httpx.AsyncClient(base_url=pages_api.url, timeout=30) as anonymous:
        for share, expected in ((report, pages.names[0]), (compare, pages.names[1])):
            path = urlsplit(share["url"]).path
            page = await anonymous.get(path, headers={"Accept": "text/html"})
            assert page.status_code == 200, page.text
            assert expected in page.text and "A read-only page shared by its team" in page.text
            assert "frame-ancestors" in page.headers["content-security-policy"]
            assert page.headers["referrer-policy"] == "same-origin"
        shared_board = await anonymous.get(urlsplit(board["url"]).path)
        assert shared_board.status_code == 200
        assert all(name in _plain(shared_board.text) for name in pages.names)
        # The board's sort links keep the share; its report links go through sign-in.
        token = board["token"]
        assert f'href="{pages_api.url}/shared/{token}?window=24h' in shared_board.text
        assert f'href="{pages_api.url}/signin?next=%2Fv1%2Fjobs%2F' in shared_board.text
        assert "/v1/status/page?" not in shared_board.text

        # A share grants its page and nothing else: not as a bearer token, not the JSON.
        for path in (f"/v1/jobs/{pages.jobs[0]}", f"/v1/jobs/{pages.jobs[0]}/report", "/v1/jobs"):
            refused = await anonymous.get(path, headers={"Authorization": f"Bearer {token}"})
            assert refused.status_code == 401, (path, refused.text)
        # An altered token (another share id, or another signature) opens nothing.
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert (await anonymous.get(f"/shared/{forged}")).status_code == 404
        other_id = "ics_" + uuid.uuid4().hex + token[36:]
        gone = await anonymous.get(f"/shared/{other_id}")
        assert gone.status_code == 404
        assert gone.headers["content-type"].startswith("application/problem+json")
        assert "copied whole" in gone.json()["detail"]

        # Revoked: 410 at once, as a page for a browser and problem+json for anyone else.
        assert (await team.http.delete(f"/v1/shares/{compare['id']}")).status_code == 204
        revoked = await anonymous.get(urlsplit(compare["url"]).path)
        assert revoked.status_code == 410 and "revoked" in revoked.json()["detail"]
        page = await anonymous.get(urlsplit(compare["url"]).path, headers={"Accept": "text/html"})
        assert page.status_code == 410 and "was revoked at" in page.text
        # Expired: the same.
        await db.execute(
            "UPDATE shares SET expires_at = now() - interval '1 second' WHERE id = $1",
            uuid.UUID(report["id"]),
        )
        expired = await anonymous.get(urlsplit(report["url"]).path)
        assert expired.status_code == 410 and "expired" in expired.json()["detail"]

    # The list says what each link opens and its state, never a token.
    listed = (await team.http.get("/v1/shares")).json()
    states = {item["id"]: item["state"] for item in listed["items"]}
    assert states == {report["id"]: "expired", compare["id"]: "revoked", board["id"]: "active"}
    assert all("token" not in item and "url" not in item for item in listed["items"])
    assert listed["items"][0]["token_hint"].startswith("ics_")
    # Nothing in the table is a token or any part of its signature.
    rows = await db.fetch(
        "SELECT row_to_json(s)::text AS r FROM shares s WHERE team_id = $1", uuid.UUID(team.team_id)
    )
    for share in (report, compare, board):
        signature = share["token"].rsplit("_", 1)[1]
        assert all(signature not in row["r"] for row in rows)

    # Another team: cannot share this team's job, read or revoke its shares.
    other: TeamClient = await new_team()
    theirs = await other.http.post(
        "/v1/shares", json={"page": "report", "job_ids": [pages.jobs[0]]}
    )
    assert theirs.status_code == 404, theirs.text
    assert (await other.http.delete(f"/v1/shares/{board['id']}")).status_code == 404
    assert (await other.http.get(f"/v1/shares/{board['id']}")).status_code == 404
    assert (await team.http.get(f"/v1/shares/{board['id']}")).json()["state"] == "active"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"page": "report", "job_ids": []}, "job_ids"),
        ({"page": "comparison", "job_ids": ["JOB"]}, "job_ids"),
        ({"page": "status", "window": "1y"}, "window"),
        ({"page": "report", "job_ids": ["JOB"], "expires_in_s": 10**9}, "expires_in_s"),
        (
            {"page": "report", "job_ids": ["JOB"], "expires_at": "2020-01-01T00:00:00Z"},
            "expires_at",
        ),
    ],
)
async def test_share_requests_that_cannot_be_kept_are_422(
    pages: Pages, body: dict[str, Any], field: str
) -> None:
    sent = {
        k: [pages.jobs[0] if j == "JOB" else j for j in v] if k == "job_ids" else v
        for k, v in body.items()
    }
    response = await pages.team.http.post("/v1/shares", json=sent)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field


def _cookie(response: httpx.Response, name: str) -> str:
    """The value `response` sets for cookie `name` (its Set-Cookie line read as sent: httpx
    keeps Secure cookies to itself over http, where a browser on loopback sends them)."""
    line = next(c for c in response.headers.get_list("set-cookie") if c.startswith(name + "="))
    return line.split(";", 1)[0].split("=", 1)[1]


def _csrf(page: str) -> str:
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


SESSION, CSRF = "__Host-infercost_session", "__Host-infercost_csrf"


async def _signed_in(api: Api, key: str, next_path: str) -> str:
    """Sign in through the form as a browser would; the session cookie's value."""
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        form = await client.get("/signin", params={"next": next_path})
        assert form.status_code == 200
        done = await client.post(
            "/signin",
            data={"key": key, "csrf": _csrf(form.text), "next": next_path},
            headers={"Origin": api.url, "Cookie": f"{CSRF}={_cookie(form, CSRF)}"},
        )
    assert done.status_code == 303, done.text
    assert done.headers["location"] == api.url + next_path
    return _cookie(done, SESSION)


async def test_sign_in_sets_a_safe_cookie_for_reads_only(
    pages_api: Api, pages: Pages, admin: httpx.AsyncClient
) -> None:
    team = pages.team
    report = f"/v1/jobs/{pages.jobs[0]}/report"
    html_accept = {"Accept": "text/html"}
    async with httpx.AsyncClient(base_url=pages_api.url, timeout=30) as browser:
        # No credentials: a page asked for by a browser goes to sign-in; JSON gets 401.
        sent = await browser.get(report, headers=html_accept)
        assert sent.status_code == 303
        assert sent.headers["location"] == (
            f"{pages_api.url}/signin?next=%2Fv1%2Fjobs%2F{pages.jobs[0]}%2Freport"
        )
        assert (await browser.get(report)).status_code == 401

        form = await browser.get("/signin", params={"next": report})
        assert "frame-ancestors" in form.headers["content-security-policy"]
        line = form.headers["set-cookie"]
        assert line.startswith(CSRF + "=")
        assert all(p in line.lower() for p in ("httponly", "secure", "samesite=strict", "path=/"))
        csrf = _csrf(form.text)
        jar = {"Cookie": f"{CSRF}={_cookie(form, CSRF)}"}
        # A form posted from another site, or without the form's token, is refused.
        for data, origin in (
            ({"key": team.key, "csrf": csrf, "next": report}, "http://192.0.2.7"),
            ({"key": team.key, "csrf": "not-the-token", "next": report}, pages_api.url),
            ({"key": team.key, "csrf": csrf, "next": report}, None),
        ):
            headers = {"Origin": origin, **jar} if origin else {}
            refused = await browser.post("/signin", data=data, headers=headers)
            assert refused.status_code == 403, refused.text
            assert SESSION not in refused.headers.get("set-cookie", "")
        # A wrong key: the form again, saying so.
        wrong = await browser.post(
            "/signin",
            data={"key": "ic_000000000000_nope", "csrf": csrf, "next": report},
            headers=jar,
        )
        assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
        # A next that leads off the site is replaced by the board.
        done = await browser.post(
            "/signin",
            data={"key": team.key, "csrf": csrf, "next": "//evil.example/x"},
            headers=jar,
        )
        assert done.status_code == 303
        assert done.headers["location"] == f"{pages_api.url}/v1/status/page"
        line = next(c for c in done.headers.get_list("set-cookie") if c.startswith(SESSION))
        assert line.startswith(SESSION + "=icb_")
        assert all(p in line.lower() for p in ("httponly", "secure", "samesite=lax", "path=/"))
        session = {"Cookie": f"{SESSION}={_cookie(done, SESSION)}"}

        # Signed in: reads open (pages and JSON), writes still need a bearer key.
        opened = await browser.get(report, headers={**html_accept, **session})
        assert opened.status_code == 200 and pages.names[0] in opened.text
        assert "Signed in as team" in opened.text
        assert (await browser.get("/v1/jobs", headers=session)).status_code == 200
        write = await browser.post("/v1/shares", json={"page": "status"}, headers=session)
        assert write.status_code == 401, write.text

        # The page's "Share this page" form: with the session's token only, and from here.
        form = {"csrf": _csrf(opened.text), "page": "report", "job_id": pages.jobs[0],
                "expires_in_s": "86400"}  # fmt: skip
        for bad, origin in (({**form, "csrf": "x"}, pages_api.url), (form, "http://192.0.2.7")):
            refused = await browser.post(
                "/shares/new", data=bad, headers={**session, "Origin": origin}
            )
            assert refused.status_code == 403, refused.text
        assert (await browser.post("/shares/new", data=form)).status_code == 403  # no session
        made = await browser.post("/shares/new", data=form, headers=session)
        assert made.status_code == 201, made.text
        link = made.text.split('id="share-url" type="text" readonly value="', 1)[1].split('"')[0]
        assert link.startswith(f"{pages_api.url}/shared/ics_")
        assert pages.names[0] in (await browser.get(link)).text  # no cookie, no key
        listed = (await team.http.get("/v1/shares")).json()["items"]
        assert listed[0]["created_by"] == f"browser, key {team.key[:15]}", listed[0]

        # Sign-out needs the page's token; then the cookie opens nothing.
        refused = await browser.post("/signout", data={"csrf": "x"}, headers=session)
        assert refused.status_code == 403
        out = await browser.post("/signout", data={"csrf": _csrf(opened.text)}, headers=session)
        assert out.status_code == 303 and out.headers["location"] == f"{pages_api.url}/signin"
        assert (await browser.get("/v1/jobs", headers=session)).status_code == 401

    # Revoking the key a browser signed in with ends its session.
    key = (await admin.post(f"/v1/teams/{team.team_id}/keys", json={"name": "browser"})).json()
    cookie = {"Cookie": f"{SESSION}={await _signed_in(pages_api, key['key'], '/v1/jobs')}"}
    async with httpx.AsyncClient(base_url=pages_api.url, timeout=30) as client:
        assert (await client.get("/v1/jobs", headers=cookie)).status_code == 200
        revoked = await admin.delete(f"/v1/teams/{team.team_id}/keys/{key['id']}")
        assert revoked.status_code == 204
        assert (await client.get("/v1/jobs", headers=cookie)).status_code == 401


async def test_json_is_never_framed_and_pages_only_by_the_portal(
    pages_api: Api, api_server: Api, pages: Pages, portals: Portals
) -> None:
    page = await pages.team.http.get(f"{pages_api.url}/v1/jobs/{pages.jobs[0]}/report")
    csp = page.headers["content-security-policy"]
    assert f"frame-ancestors {portals.allowed}" in csp and "x-frame-options" not in page.headers
    data = await pages.team.http.get(f"{pages_api.url}/v1/jobs")
    assert data.headers["x-frame-options"] == "DENY"
    assert data.headers["content-security-policy"] == "frame-ancestors 'none'"
    # The suite's API lists no origin: no page of it may be framed at all.
    default = await pages.team.http.get(f"{api_server.url}/v1/jobs/{pages.jobs[0]}/report")
    assert "frame-ancestors 'none'" in default.headers["content-security-policy"]
    assert default.headers["x-frame-options"] == "DENY"


@dataclass
class Opened:
    status: int
    url: str
    text: str
    console: list[str]


async def test_pages_in_chromium_through_shares_and_a_session(
    pages_api: Api, pages: Pages, portals: Portals, db: asyncpg.Connection
) -> None:
    """What a person sees: each page through its share link, and through a signed-in
    session after signing in with the form; nothing without either; a portal on the allowed
    origin frames a shared report, one on another origin gets nothing."""
    _chromium_or_skip()
    from playwright.async_api import async_playwright

    team = pages.team
    shares = {
        "report": await _share(team, pages_api, page="report", job_ids=[pages.jobs[0]]),
        "comparison": await _share(team, pages_api, page="comparison", job_ids=pages.jobs),
        "status": await _share(team, pages_api, page="status"),
    }
    report_path = f"/v1/jobs/{pages.jobs[0]}/report"
    compare_path = f"/v1/reports/compare?job_id={pages.jobs[0]}&job_id={pages.jobs[1]}"
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(_chromium_or_skip()), args=["--no-sandbox"]
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            console: list[str] = []
            page.on("console", lambda m: console.append(m.text))

            async def open_(url: str, shot: str | None = None) -> Opened:
                response = await page.goto(url, wait_until="load")
                assert response is not None
                if shot:
                    await page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
                return Opened(
                    response.status, page.url, _plain(await page.content()), list(console)
                )

            # No credentials: every page lands on the sign-in form.
            for path in (report_path, compare_path, "/v1/status/page"):
                opened = await open_(pages_api.url + path)
                assert opened.url.startswith(f"{pages_api.url}/signin?next="), opened.url
                assert "Team API key" in opened.text and pages.names[0] not in opened.text

            # Through share links, with no key.
            opened = await open_(shares["report"]["url"], "shared-report.png")
            assert opened.status == 200 and pages.names[0] in opened.text
            opened = await open_(shares["comparison"]["url"], "shared-compare.png")
            assert opened.status == 200 and all(n in opened.text for n in pages.names)
            opened = await open_(shares["status"]["url"], "shared-board.png")
            assert opened.status == 200 and all(n in opened.text for n in pages.names)
            # Following the board's window link keeps the share.
            await page.click("nav.windows a:text('24h')")
            assert page.url.startswith(shares["status"]["url"] + "?window=24h"), page.url
            assert pages.names[0] in _plain(await page.content())
            # Its report links lead to sign-in (the share does not cover the reports).
            await page.click(f"tr:has-text('{pages.names[0]}') td:last-child a")
            assert page.url.startswith(f"{pages_api.url}/signin?next="), page.url

            # A revoked link stops working.
            assert (
                await team.http.delete(f"/v1/shares/{shares['report']['id']}")
            ).status_code == 204
            opened = await open_(shares["report"]["url"])
            assert opened.status == 410 and "was revoked" in opened.text
            assert pages.names[0] not in opened.text

            # So does an expired one.
            await db.execute(
                "UPDATE shares SET expires_at = now() - interval '1 second' WHERE id = $1",
                uuid.UUID(shares["comparison"]["id"]),
            )
            opened = await open_(shares["comparison"]["url"])
            assert opened.status == 410 and "expired at" in opened.text
            assert pages.names[1] not in opened.text

            # Sign in with the form, then open the pages through the session.
            await open_(pages_api.url + report_path)
            await page.fill("#key", team.key)
            await page.click("button[type=submit]")
            await page.wait_for_load_state("load")
            assert page.url == pages_api.url + report_path, page.url
            assert pages.names[0] in _plain(await page.content())
            cookie = next(c for c in await context.cookies() if "session" in c["name"])
            assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
            # Its "Share this page" button makes a link another browser opens with no key.
            await page.select_option("select[name=expires_in_s]", "86400")
            await page.click("text=Share this page")
            await page.wait_for_load_state("load")
            link = await page.input_value("#share-url")
            stranger = await browser.new_context()
            try:
                elsewhere = await stranger.new_page()
                answered = await elsewhere.goto(link, wait_until="load")
                assert answered is not None and answered.status == 200
                assert pages.names[0] in _plain(await elsewhere.content())
            finally:
                await stranger.close()
            opened = await open_(pages_api.url + compare_path, "signed-in-compare.png")
            assert opened.status == 200 and all(n in opened.text for n in pages.names)
            opened = await open_(pages_api.url + "/v1/status/page")
            assert opened.status == 200 and all(n in opened.text for n in pages.names)
            # The board's report link opens the report in this browser.
            await page.click(f"tr:has-text('{pages.names[0]}') td:last-child a")
            assert page.url == pages_api.url + report_path, page.url
            # The footer's definitions page opens too.
            await page.click("footer a")
            assert page.url == f"{pages_api.url}/docs/figures.md"
            assert "What the figures mean" in await page.content()
            # Sign out: the pages go back to sign-in.
            await open_(pages_api.url + report_path)
            await page.click("text=Sign out")
            await page.wait_for_load_state("load")
            assert page.url == f"{pages_api.url}/signin"
            opened = await open_(pages_api.url + report_path)
            assert opened.url.startswith(f"{pages_api.url}/signin?next="), opened.url

            # Framed by a portal: shown on the allowed origin, refused on another.
            target = shares["status"]["url"]
            for origin, shot in (
                (portals.allowed, "portal-allowed.png"),
                (portals.refused, "portal-refused.png"),
            ):
                console.clear()
                await page.goto(f"{origin}/frame?src={target}", wait_until="load")
                await page.wait_for_timeout(300)
                await page.screenshot(path=str(ARTIFACTS / shot))
                frame = next(f for f in page.frames if f is not page.main_frame)
                try:
                    framed = _plain(await frame.content())
                except Exception:  # an error page may not be readable
                    framed = ""
                if origin == portals.allowed:
                    assert all(n in framed for n in pages.names), console
                else:
                    assert pages.names[0] not in framed
                    assert any("frame-ancestors" in m for m in console), console
        finally:
            await browser.close()


async def test_single_sign_on_tokens_read_their_teams_jobs(
    pages_api: Api,
    pages: Pages,
    new_team: Callable[..., Any],
    issuer: Issuer,
    db: asyncpg.Connection,
) -> None:
    other: TeamClient = await new_team()
    other_endpoint = await other.create_endpoint(name="theirs")
    other_job, _ = await run(db, other, other_endpoint, ago=timedelta(hours=1), ttft=50.0)
    team_name = await db.fetchval(
        "SELECT name FROM teams WHERE id = $1", uuid.UUID(pages.team.team_id)
    )

    async def get(token: str, path: str = "/v1/jobs") -> httpx.Response:
        async with httpx.AsyncClient(base_url=pages_api.url, timeout=30) as client:
            return await client.get(path, headers={"Authorization": f"Bearer {token}"})

    # The team claim names the team (by name here; its id works too).
    good = issuer.token(infercost_team=team_name)
    listed = await get(good)
    assert listed.status_code == 200, listed.text
    ids = {j["id"] for j in listed.json()["items"]}
    assert set(pages.jobs) <= ids and other_job not in ids
    assert (await get(good, f"/v1/jobs/{other_job}")).status_code == 404
    by_id = await get(issuer.token(infercost_team=pages.team.team_id))
    assert by_id.status_code == 200 and set(pages.jobs) <= {j["id"] for j in by_id.json()["items"]}
    # A share made with the token says who made it.
    async with httpx.AsyncClient(base_url=pages_api.url, timeout=30) as client:
        made = await client.post(
            "/v1/shares", json={"page": "status"}, headers={"Authorization": f"Bearer {good}"}
        )
    assert made.status_code == 201 and made.json()["created_by"] == "sso someone"

    refused = {
        "audience": issuer.token(infercost_team=team_name, aud="another-service"),
        "expired": issuer.token(
            infercost_team=team_name, iat=int(time.time()) - 900, exp=int(time.time()) - 600
        ),
        "signature does not verify": issuer.token(issuer.other, infercost_team=team_name),
        "does not publish": issuer.token(issuer.other, kid="k9", infercost_team=team_name),
        "issued by another issuer": issuer.token(infercost_team=team_name, iss="http://192.0.2.1"),
    }
    for phrase, token in refused.items():
        response = await get(token)
        assert response.status_code == 401, (phrase, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert phrase in response.json()["detail"], (phrase, response.json())
    # Valid tokens that name no team here, or none at all: 403 saying what to ask for.
    for token, phrase in (
        (issuer.token(infercost_team="no-such-team"), "no team here"),
        (issuer.token(), "no 'infercost_team' claim"),
    ):
        response = await get(token)
        assert response.status_code == 403 and phrase in response.json()["detail"], response.text
    # Thirteen tokens checked, the issuer's keys fetched once (twice if this test ran past
    # the 30 s after which an unknown key id fetches them again): they are kept.
    assert issuer.fetched["/jwks"] <= 2, issuer.fetched
    assert issuer.fetched["/.well-known/openid-configuration"] == issuer.fetched["/jwks"]
