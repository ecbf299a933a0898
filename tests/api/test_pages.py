"""The pieces every page shares: where sign-in may send a browser back to, names that wrap
between words, the documentation pages the footers link to."""

from __future__ import annotations

import pytest

from api.domain.signin.docs import docs_dirs, render_doc
from api.domain.status.page import breakable
from api.pages import safe_next
from infercost.reports.render import render_job_report
from tests.infercost.test_charts import _report, deployment


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/v1/jobs/x/report", "/v1/jobs/x/report"),
        ("/v1/reports/compare?job_id=a&job_id=b", "/v1/reports/compare?job_id=a&job_id=b"),
        (None, "/v1/status/page"),
        ("", "/v1/status/page"),
        ("https://evil.example/", "/v1/status/page"),
        ("//evil.example/x", "/v1/status/page"),
        ("/\\evil.example", "/v1/status/page"),
        ("/x\r\nSet-Cookie: a=b", "/v1/status/page"),
    ],
)
def test_sign_in_only_sends_a_browser_back_to_this_service(given: str | None, kept: str) -> None:
    assert safe_next(given) == kept


def test_names_wrap_after_dots_and_slashes_and_stay_escaped() -> None:
    assert str(breakable("llama-70b.h200x8")) == "llama-70b.<wbr>h200x8"
    assert str(breakable("meta-llama/Llama-3.1")) == "meta-llama/<wbr>Llama-3.<wbr>1"
    assert str(breakable("<script>a.b</script>")) == "&lt;script&gt;a.<wbr>b&lt;/<wbr>script&gt;"


def test_the_figures_page_is_served_with_its_anchors() -> None:
    page = next(d / "figures.md" for d in docs_dirs() if (d / "figures.md").is_file())
    html = render_doc(page.read_text())
    assert "<title>What the figures mean: infercost</title>" in html
    # The anchors other pages link to (figures.md#adequacy, #other-tools-definitions).
    assert 'id="adequacy"' in html and 'id="other-tools-definitions"' in html
    assert "<table>" in html and "<script" not in html
    # Raw HTML in a page is text, never markup.
    assert "&lt;b&gt;" in render_doc("# T\n\n<b>bold</b>\n")


def test_report_footers_point_to_the_definitions_page() -> None:
    html = render_job_report(_report(deployment("footer")))
    assert 'href="/docs/figures.md">What the figures mean</a>' in html
    assert "METRICS.md" not in html
