"""The scraper against hostile or misconfigured metrics URLs on a real loopback server: it
keeps only known series and labels, follows no redirect, cuts large bodies, obeys the
outbound policy, and no text of any answer reaches an error or a kept value."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infercost.net.outbound import Policy
from infercost.telemetry import Scraper, ScrapeResult, lookup
from infercost.telemetry.scrape import MAX_LABEL_CHARS, display_url
from tests.exporter import SECRET, Exporter, running_exporter


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    with running_exporter() as server:
        yield server


def scrape(*urls: str, policy: Policy | None = None) -> ScrapeResult:
    """Two scrapes of each URL (the first and the final one)."""
    with Scraper(list(urls), interval_s=5.0, timeout_s=2.0, policy=policy) as scraper:
        pass
    assert scraper.result is not None
    return scraper.result


def everything(result: ScrapeResult) -> str:
    """All a run would store or show of a scrape: errors, samples and listed names."""
    return repr(
        (
            [str(e) for e in result.errors],
            [tuple(s) for s in result.samples],
            sorted(result.unmapped),
            result.scrapes,
        )
    )


def reason(result: ScrapeResult) -> str:
    assert len(result.errors) == 1, result.errors
    return result.errors[0].reason


def test_an_html_error_page_is_a_status_not_its_text(exporter: Exporter) -> None:
    result = scrape(exporter.base + "/secret-404")
    assert reason(result) == "HTTP 404: nothing at this path; check the metrics URL"
    assert str(result.errors[0]) == (
        f"telemetry from {exporter.base}/secret-404: HTTP 404: nothing at this path; "
        "check the metrics URL (2 times)"
    )
    assert SECRET not in everything(result)
    assert result.samples == []


def test_a_redirect_is_not_followed_and_names_only_the_host(exporter: Exporter) -> None:
    away = scrape(exporter.base + "/redirect-away")
    assert reason(away) == (
        "HTTP 302: redirects to internal.example; infercost follows no redirects, so put the "
        "final address in the endpoint's metrics_urls"
    )
    assert SECRET not in everything(away)
    assert "8080" not in reason(away) and "admin" not in reason(away)

    here = scrape(exporter.base + "/redirect-here")
    assert reason(here).startswith("HTTP 302: redirects on the same host;")
    assert "/redirect-target" not in exporter.paths  # never fetched


def test_text_that_is_not_prometheus_is_refused_without_quoting(exporter: Exporter) -> None:
    result = scrape(exporter.base + "/garbage", exporter.base + "/html")
    reasons = {e.url.rsplit("/", 1)[1]: e.reason for e in result.errors}
    assert reasons == {
        "garbage": "answered something that is not Prometheus text",
        "html": "answered something that is not Prometheus text (text/html)",
    }
    assert SECRET not in everything(result)
    assert "Welcome" not in everything(result)


def test_a_body_past_the_bound_is_cut_off(exporter: Exporter) -> None:
    result = scrape(exporter.base + "/huge")
    assert reason(result) == (
        "answer larger than 4 MiB, cut off; a metrics page is kilobytes: is this a metrics URL?"
    )
    assert SECRET not in everything(result)
    # A declared length past a smaller bound is refused before reading.
    with Scraper([exporter.base + "/metrics"], interval_s=5.0, max_body_bytes=1024) as small:
        pass
    assert small.result is not None
    assert [e.reason for e in small.result.errors] == [
        "answer larger than 1 KiB, cut off; a metrics page is kilobytes: is this a metrics URL?"
    ]


def test_only_known_series_and_labels_are_kept(exporter: Exporter) -> None:
    result = scrape(exporter.base + "/noisy")
    assert result.errors == []
    assert [(s.metric, dict(s.labels), s.value) for s in result.samples] == [
        ("vllm:num_requests_running", {"model_name": "m" * MAX_LABEL_CHARS}, 3.0)
    ] * 2
    # A new metric of a known family is listed by name; an unknown family is not.
    assert result.unmapped == {"vllm:some_new_gauge"}
    assert SECRET not in everything(result)
    assert SECRET.replace("-", "_") not in everything(result)


def test_a_page_without_known_metrics_is_one_error(exporter: Exporter) -> None:
    result = scrape(exporter.base + "/unknown-only")
    assert reason(result) == (
        "answered Prometheus text, but none of its 1 metrics is one infercost maps "
        "(vLLM, SGLang, TGI, llama.cpp or the DCGM exporter)"
    )
    assert result.samples == [] and result.unmapped == set()
    assert SECRET not in everything(result)


def test_llamacpp_page_keeps_its_known_metrics(exporter: Exporter) -> None:
    ok = scrape(exporter.base + "/llamacpp")
    assert ok.errors == []
    specs = [lookup(s.metric) for s in ok.samples]
    assert {spec.family if spec else None for spec in specs} == {"llamacpp"}
    assert len(ok.samples) == 2 * 9  # nine mapped metrics, two scrapes
    assert "llamacpp:n_tokens_max" in ok.unmapped


def test_credentials_and_query_never_shown(exporter: Exporter) -> None:
    port = exporter.base.rsplit(":", 1)[1]
    url = f"http://user:{SECRET}@127.0.0.1:{port}/secret-404?token={SECRET}"
    result = scrape(url)
    assert result.errors[0].url == f"http://127.0.0.1:{port}/secret-404?\u2026"
    assert SECRET not in everything(result)
    assert display_url("http://[::1]:9400/metrics") == "http://[::1]:9400/metrics"


def test_the_outbound_policy_is_asked_before_every_scrape(exporter: Exporter) -> None:
    before = len(exporter.paths)
    refused = scrape(exporter.base + "/metrics", policy=Policy())
    assert reason(refused).startswith("refused by the outbound policy: ")
    assert "loopback" in reason(refused)
    assert refused.samples == []
    assert len(exporter.paths) == before  # no request left

    allowed = scrape(exporter.base + "/metrics", policy=Policy.parse(["127.0.0.0/8"]))
    assert allowed.errors == []
    assert allowed.scrapes == {exporter.base + "/metrics": 2}
