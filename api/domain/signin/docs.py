"""GET /docs/<page>.md: the project's documentation pages (docs/ beside the package, or in
the working directory, as the container image has it) as HTML, so that the links pages carry
(every report's footer points to /docs/figures.md, the definitions of its figures) open in a
browser, and links between pages work as they do in the repository."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from litestar import MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath
from markdown_it import MarkdownIt
from markupsafe import Markup

from api.auth import AppSettings
from api.pages import page_headers
from infercost.errors import NotFound

_PAGE = re.compile(r"^[a-z][a-z0-9-]*\.md$")
_HEADING = re.compile(r"<(h[1-6])>(.*?)</\1>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def docs_dirs() -> list[Path]:
    """Where the pages may be: docs/ of the source tree this package runs from, then docs/
    in the working directory."""
    return [Path(__file__).resolve().parents[3] / "docs", Path.cwd() / "docs"]


def _slug(html_text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as -."""
    text = _TAG.sub("", html_text).lower()
    text = re.sub(r"&[a-z]+;|&#\d+;", "", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _markdown() -> MarkdownIt:
    # Raw HTML in a page is shown as text, never passed through.
    return MarkdownIt("commonmark", {"html": False}).enable("table")


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("api.domain.signin", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )


def render_doc(markdown: str) -> str:
    """A page of docs/ as HTML, each heading with GitHub's anchor."""
    body = _HEADING.sub(
        lambda m: f'<{m.group(1)} id="{_slug(m.group(2))}">{m.group(2)}</{m.group(1)}>',
        _markdown().render(markdown),
    )
    first = re.search(r"^# (.+)$", markdown, re.MULTILINE)
    return (
        _environment()
        .get_template("doc.html.j2")
        .render(
            title=first.group(1) if first else "Documentation",
            body=Markup(body),  # noqa: S704 - markdown-it escapes the text; raw HTML is off
            index="README.md",
        )
    )


@get(
    "/docs/{page:str}",
    media_type=MediaType.HTML,
    include_in_schema=False,
    sync_to_thread=False,
)
def doc_page(
    request: Request[Any, Any, State], settings: AppSettings, page: FromPath[str]
) -> Response[str]:
    """One documentation page, e.g. /docs/figures.md (no key needed: it is the manual)."""
    for folder in docs_dirs() if _PAGE.match(page) else []:
        path = folder / page
        if path.is_file():
            html = render_doc(path.read_text(encoding="utf-8"))
            return Response(
                html,
                media_type=MediaType.HTML,
                headers=page_headers(settings, cache="public, max-age=300"),
            )
    raise NotFound(
        f"no documentation page '{page}': the pages are docs/*.md, e.g. /docs/figures.md"
    )
