"""The admin commands: `infercost teams create|list` and `infercost keys list|create|revoke`
(and `infercost audit`, a team's own log of changes, with its team key).

They use the admin routes of the HTTP API (POST /v1/teams, /v1/teams/{id}/keys) with the admin
token: `--admin-token`, else INFERCOST_ADMIN_TOKEN (what `docker compose` gives every container
from `.env`), else the token `infercost up` keeps in INFERCOST_DATA_DIR/admin.token. So right
after `docker compose up`, `docker compose exec api infercost teams create NAME` makes the first
team and prints its key; on a laptop, `infercost teams create NAME` next to `make run` does."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli.client import ApiClient, ApiError, Connection, api_options, resolve_connection
from cli.datadir import ADMIN_TOKEN_FILE
from cli.output import console, emit_json, is_uuid, json_option, table, when
from cli.watch import cells
from infercost.security import KEY_SCHEME
from infercost.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def admin_connection(url: str | None, token: str | None) -> Connection:
    """The API address (as the client commands find it) and the admin token: the option or
    INFERCOST_ADMIN_TOKEN (click folds the variable in), else `infercost up`'s token file."""
    settings = Settings.from_env()
    connection = resolve_connection(url, "", settings)
    if not token:
        path = settings.data_dir / ADMIN_TOKEN_FILE
        try:
            token = path.read_text().strip() or None
        except FileNotFoundError:
            token = None
        except OSError as exc:
            raise click.ClickException(
                f"cannot read the admin token at {path}: {exc.strerror}"
            ) from None
        if token is None:
            raise click.ClickException(
                "no admin token: set INFERCOST_ADMIN_TOKEN (the server's; with docker compose, "
                "run the command in a container: `docker compose exec api infercost ...`), "
                f"pass --admin-token, or run next to `make run` (it keeps {path})"
            )
    return Connection(connection.url, token)


def admin_options(command: F) -> F:
    """`--url` and `--admin-token` on an admin command; it receives `client`."""

    @click.option(
        "--url",
        envvar="INFERCOST_URL",
        help="API base URL (env INFERCOST_URL; default http://INFERCOST_HOST:INFERCOST_PORT).",
    )
    @click.option(
        "--admin-token",
        envvar="INFERCOST_ADMIN_TOKEN",
        help="The server's admin token (env INFERCOST_ADMIN_TOKEN; default: "
        "INFERCOST_DATA_DIR/admin.token, as `infercost up` keeps it).",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, url: str | None, admin_token: str | None, **kwargs: Any) -> Any:
        with ApiClient(admin_connection(url, admin_token)) as client:
            try:
                return command(*args, client=client, **kwargs)
            except ApiError as exc:
                if exc.status == 403:
                    raise click.ClickException(
                        f"{exc.message} (the admin token given is not this server's "
                        "INFERCOST_ADMIN_TOKEN)"
                    ) from None
                raise

    return wrapper  # type: ignore[return-value]


def _team(client: ApiClient, text: str) -> dict[str, Any]:
    """The team a user means, by name or id."""
    teams: list[dict[str, Any]] = client.get("/v1/teams")
    for team in teams:
        if team["name"] == text or (is_uuid(text) and team["id"] == text.lower()):
            return team
    names = ", ".join(t["name"] for t in teams) or "none yet: `infercost teams create NAME`"
    raise click.ClickException(f"no team '{text}' (teams: {names})")


def _print_key(key: dict[str, Any], team: str) -> None:
    click.echo(f"API key '{key['name']}' for team {team} ({KEY_SCHEME}_{key['prefix']}):")
    click.echo(key["key"])
    click.echo(
        "It is shown only this once: keep it (e.g. in INFERCOST_TOKEN, or as "
        "`Authorization: Bearer <key>`).",
        err=True,
    )


# -- teams -------------------------------------------------------------------------------


@click.group()
def teams() -> None:
    """Teams (admin token): every endpoint, job and price belongs to one."""


@teams.command("create")
@click.argument("name")
@click.option("--key-name", default="default", show_default=True, help="Name of its first key.")
@click.option("--no-key", is_flag=True, help="Create the team without a key.")
@json_option
@admin_options
def teams_create(name: str, key_name: str, no_key: bool, as_json: bool, client: ApiClient) -> None:
    """Create team NAME and a first API key for it (printed once)."""
    team = client.post("/v1/teams", {"name": name})
    key = None if no_key else client.post(f"/v1/teams/{team['id']}/keys", {"name": key_name})
    if as_json:
        emit_json({"team": team, "key": key})
        return
    click.echo(f"created team {team['name']} ({team['id']})")
    if key is not None:
        _print_key(key, team["name"])


@teams.command("list")
@json_option
@admin_options
def teams_list(as_json: bool, client: ApiClient) -> None:
    """Every team, by name."""
    found = client.get("/v1/teams")
    if as_json:
        emit_json(found)
        return
    rows = table("id", "name", "created")
    for team in found:
        rows.add_row(*cells(team["id"], team["name"], when(team["created_at"])))
    click.echo(f"{len(found)} teams")
    if found:
        console().print(rows)


# -- keys --------------------------------------------------------------------------------


@click.group()
def keys() -> None:
    """API keys of a team (admin token): create one (shown once), list, revoke."""


@keys.command("create")
@click.argument("team")
@click.option("--name", default="default", show_default=True, help="A label for the key.")
@json_option
@admin_options
def keys_create(team: str, name: str, as_json: bool, client: ApiClient) -> None:
    """Create an API key for TEAM (its name or id); the key is printed this once."""
    found = _team(client, team)
    key = client.post(f"/v1/teams/{found['id']}/keys", {"name": name})
    if as_json:
        emit_json(key)
    else:
        _print_key(key, found["name"])


@keys.command("list")
@click.argument("team")
@json_option
@admin_options
def keys_list(team: str, as_json: bool, client: ApiClient) -> None:
    """TEAM's keys (prefixes only: secrets are never stored), revoked ones marked."""
    found = _team(client, team)
    listed = client.get(f"/v1/teams/{found['id']}/keys")
    if as_json:
        emit_json(listed)
        return
    rows = table("id", "name", "prefix", "created", "revoked")
    for key in listed:
        rows.add_row(
            *cells(
                key["id"],
                key["name"],
                f"{KEY_SCHEME}_{key['prefix']}",
                when(key["created_at"]),
                when(key["revoked_at"]) if key.get("revoked_at") else "-",
            )
        )
    console().print(rows)


@keys.command("revoke")
@click.argument("team")
@click.argument("key")
@json_option
@admin_options
def keys_revoke(team: str, key: str, as_json: bool, client: ApiClient) -> None:
    """Revoke KEY of TEAM: its id, its prefix (ic_...) or its name if only one live key has
    it. Requests with it get 401 at once."""
    found = _team(client, team)
    live = [k for k in client.get(f"/v1/teams/{found['id']}/keys") if not k.get("revoked_at")]
    text = key.strip()
    prefix = text.removeprefix(f"{KEY_SCHEME}_")
    matches = [k for k in live if text.lower() == k["id"] or prefix == k["prefix"]] or [
        k for k in live if k["name"] == text
    ]
    if not matches:
        raise click.ClickException(
            f"team {found['name']} has no live key '{text}' (`infercost keys list "
            f"{found['name']}` shows them)"
        )
    if len(matches) > 1:
        raise click.ClickException(
            f"{len(matches)} live keys of team {found['name']} are named '{text}': give the "
            "key's id or prefix"
        )
    chosen = matches[0]
    client.delete(f"/v1/teams/{found['id']}/keys/{chosen['id']}")
    if as_json:
        emit_json({**chosen, "revoked": True})
    else:
        click.echo(
            f"revoked key '{chosen['name']}' ({KEY_SCHEME}_{chosen['prefix']}) of team "
            f"{found['name']}"
        )


# -- audit -------------------------------------------------------------------------------


@click.command()
@click.option("--action", help="An action (price.withdraw) or a kind of target (price).")
@click.option("--target", "target_id", type=click.UUID, help="Only changes to this id.")
@click.option("--since", help="RFC 3339: changes at or after this time.")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@json_option
@api_options
def audit(  # click passes every option by name
    *,
    action: str | None,
    target_id: Any,
    since: str | None,
    limit: int,
    as_json: bool,
    client: ApiClient,
) -> None:
    """Your team's audit log, newest first: who changed what, and when."""
    page = client.get(
        "/v1/audit",
        action=action,
        target_id=str(target_id) if target_id else None,
        since=since,
        limit=limit,
    )
    if as_json:
        emit_json(page)
        return
    click.echo(f"{page['total']} changes" + (f", newest {limit}" if page["total"] > limit else ""))
    rows = table("when", "who", "action", "what", ids=())
    for event in page["items"]:
        rows.add_row(*cells(when(event["at"]), event["actor"], event["action"], event["summary"]))
    if page["items"]:
        console().print(rows)
