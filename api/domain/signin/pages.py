"""The sign-in page and short message pages (a link that expired, a form that came from
elsewhere), on the reports' base template and rules: escaped, no script, nothing external."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

from infercost.reports.links import PageLinks
from infercost.reports.render import _environment as report_environment


@cache
def _environment() -> Environment:
    base = report_environment()
    env = Environment(
        loader=ChoiceLoader(
            [PackageLoader("api.domain.signin", "templates"), base.loader]  # type: ignore[list-item]
        ),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(base.filters)
    return env


def render_signin(
    *, links: PageLinks, csrf: str, next_path: str, hours: float, error: str | None, now: datetime
) -> str:
    """The sign-in form."""
    return (
        _environment()
        .get_template("signin.html.j2")
        .render(
            links=links,
            action=f"{links.base}/signin",
            csrf=csrf,
            next=next_path,
            hours=f"{hours:g}",
            error=error,
            generated_at=now,
        )
    )


def render_message(
    *,
    links: PageLinks,
    heading: str,
    message: str,
    now: datetime,
    tone: str = "warn",
    signin: str | None = None,
) -> str:
    """A page with one message (and a way to sign in, where that helps)."""
    return (
        _environment()
        .get_template("message.html.j2")
        .render(
            links=links,
            heading=heading,
            message=message,
            tone=tone,
            signin=signin,
            generated_at=now,
        )
    )


def render_shared(
    *,
    links: PageLinks,
    url: str,
    what: str,
    page_url: str,
    share_id: str,
    expires_at: datetime,
    now: datetime,
) -> str:
    """The page a "Share this page" button leads to: the new link, shown once."""
    return (
        _environment()
        .get_template("shared.html.j2")
        .render(
            links=links,
            url=url,
            what=what,
            page_url=page_url,
            share_id=share_id,
            expires_at=expires_at,
            generated_at=now,
        )
    )
