"""What a user may type for an id: the whole UUID, a unique prefix of it, or (endpoints) a
name. Every command that takes an endpoint, job or run resolves it here, so an id cut to
its first characters in a table, or copied whole, works everywhere."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import click

from cli.client import ApiClient
from cli.output import is_uuid

#: Shortest id prefix accepted: shorter ones match too much to be worth a lookup.
MIN_PREFIX = 4
#: Newest jobs searched for a run id prefix (a run's job is read for its runs).
RUN_SEARCH_JOBS = 200
_PREFIX = re.compile(r"[0-9a-fA-F-]+")


class IdRef(click.ParamType):  # type: ignore[type-arg]
    """A whole id or an id prefix (checked for form at parse time; looked up later)."""

    name = "id"

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The text as given, once it can be an id or an id prefix."""
        text = str(value).strip()
        if is_uuid(text) or (len(text) >= MIN_PREFIX and _PREFIX.fullmatch(text)):
            return text
        self.fail(
            f"'{text}' is not a {self.kind} id: give the whole id or at least its first "
            f"{MIN_PREFIX} characters",
            param,
            ctx,
        )
        return text  # not reached: fail raises


JOB = IdRef("job")
RUN = IdRef("run")


def _by_prefix(kind: str, text: str, ids: Iterable[str], hint: str) -> str:
    """The one id starting with `text`, else a ClickException saying why."""
    prefix = text.lower()
    if len(prefix) < MIN_PREFIX or not _PREFIX.fullmatch(prefix):
        raise click.ClickException(
            f"'{text}' is not a {kind} id: give the whole id or at least its first "
            f"{MIN_PREFIX} characters ({hint})"
        )
    matches = sorted({i for i in ids if i.startswith(prefix)})
    if not matches:
        raise click.ClickException(f"no {kind} id starts with '{text}' ({hint})")
    if len(matches) > 1:
        raise click.ClickException(
            f"'{text}' is the start of {len(matches)} {kind} ids ({', '.join(matches[:5])}"
            f"{', ...' if len(matches) > 5 else ''}): give more characters"
        )
    return matches[0]


def endpoint(client: ApiClient, text: str) -> dict[str, Any]:
    """The endpoint a user means: by whole id, by name, or by a unique id prefix."""
    if is_uuid(text):
        found: dict[str, Any] = client.get(f"/v1/endpoints/{text}")
        return found
    items = client.pages("/v1/endpoints")
    for item in items:
        if item["name"] == text:
            return dict(item)
    if _PREFIX.fullmatch(text) and len(text) >= MIN_PREFIX:
        try:
            chosen = _by_prefix("endpoint", text, (i["id"] for i in items), "")
        except click.ClickException:
            pass
        else:
            return next(dict(i) for i in items if i["id"] == chosen)
    names = ", ".join(sorted(i["name"] for i in items))
    known = names or "none: register one with `infercost endpoints add`"
    raise click.ClickException(f"no endpoint named '{text}' in your team (yours: {known})")


def job_id(client: ApiClient, text: str) -> str:
    """The whole id of the job a user means (whole id or unique prefix)."""
    if is_uuid(text):
        return text.lower()
    ids = [j["id"] for j in client.pages("/v1/jobs")]
    return _by_prefix("job", text, ids, "`infercost jobs list` shows them")


def run_id(client: ApiClient, text: str) -> str:
    """The whole id of the run a user means (whole id or a unique prefix among the runs of
    the team's newest jobs)."""
    if is_uuid(text):
        return text.lower()
    _by_prefix("run", text, [text.lower()], "")  # the form, before any lookup
    ids: list[str] = []
    for job in client.pages("/v1/jobs", most=RUN_SEARCH_JOBS):
        ids.extend(r["id"] for r in client.get(f"/v1/jobs/{job['id']}/runs"))
    return _by_prefix(
        "run",
        text,
        ids,
        f"searched the runs of your newest {RUN_SEARCH_JOBS} jobs; `infercost jobs show JOB` "
        "lists a job's runs",
    )


def price_id(client: ApiClient, text: str) -> str:
    """The whole id of the price book entry a user means (whole id or unique prefix among
    the entries not withdrawn)."""
    if is_uuid(text):
        return text.lower()
    ids = [p["id"] for p in client.pages("/v1/prices")]
    return _by_prefix("price", text, ids, "`infercost prices list` shows them")


def traffic(client: ApiClient, text: str) -> dict[str, Any]:
    """The request log a user means: by whole id, by name, or by a unique id prefix."""
    if is_uuid(text):
        found: dict[str, Any] = client.get(f"/v1/traffic/{text}")
        return found
    items = client.pages("/v1/traffic")
    for item in items:
        if item["name"] == text:
            return dict(item)
    if _PREFIX.fullmatch(text) and len(text) >= MIN_PREFIX:
        try:
            chosen = _by_prefix("traffic", text, (i["id"] for i in items), "")
        except click.ClickException:
            pass
        else:
            return next(dict(i) for i in items if i["id"] == chosen)
    names = ", ".join(sorted(i["name"] for i in items))
    known = names or "none: import one with `infercost traffic import FILE --format ...`"
    raise click.ClickException(f"no request log named '{text}' in your team (yours: {known})")
