"""The admin path from the command line, as docs/operations.md describes it after `docker
compose up`: `infercost teams create` with the server's INFERCOST_ADMIN_TOKEN makes a team and
prints its first key, which then works; `keys create|list|revoke` manage its keys (a revoked
key gets 401 at once); a wrong or missing admin token says what to do."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from cli import main
from infercost.net.tls import tls_context
from tests.conftest import Api

pytestmark = pytest.mark.integration


def admin_cli(
    api: Api, *args: str, token: str | None = None, data_dir: Path | None = None
) -> Result:
    """`infercost ARGS` with the server's environment as a container of the compose file has
    it (INFERCOST_URL and INFERCOST_ADMIN_TOKEN), or a data dir holding admin.token."""
    env = {"INFERCOST_URL": api.url, "INFERCOST_ADMIN_TOKEN": token, "INFERCOST_TOKEN": None}
    if data_dir is not None:
        env["INFERCOST_DATA_DIR"] = str(data_dir)
    return CliRunner().invoke(main, list(args), env=env)


def status_with(api: Api, key: str) -> int:
    """What GET /v1/jobs answers a key."""
    response = httpx.get(
        f"{api.url}/v1/jobs", headers={"Authorization": f"Bearer {key}"}, verify=tls_context()
    )
    return response.status_code


def test_teams_and_keys_from_the_command_line(api_server: Api) -> None:
    name = f"platform-{uuid.uuid4().hex[:6]}"
    made = admin_cli(api_server, "teams", "create", name, token=api_server.admin_token)
    assert made.exit_code == 0, made.output
    lines = made.stdout.splitlines()
    assert lines[0].startswith(f"created team {name} (")
    first_key = lines[2]
    assert first_key.startswith("ic_")
    assert "shown only this once" in made.stderr
    assert status_with(api_server, first_key) == 200

    listed = admin_cli(api_server, "teams", "list", "--json", token=api_server.admin_token)
    assert name in [t["name"] for t in json.loads(listed.stdout)]

    second = admin_cli(
        api_server, "keys", "create", name, "--name", "ci", "--json", token=api_server.admin_token
    )
    assert second.exit_code == 0, second.output
    ci = json.loads(second.stdout)
    assert ci["name"] == "ci" and status_with(api_server, ci["key"]) == 200

    keys = admin_cli(api_server, "keys", "list", name, "--json", token=api_server.admin_token)
    assert sorted(k["name"] for k in json.loads(keys.stdout)) == ["ci", "default"]
    assert all("key" not in k for k in json.loads(keys.stdout))

    revoked = admin_cli(
        api_server, "keys", "revoke", name, f"ic_{ci['prefix']}", token=api_server.admin_token
    )
    assert revoked.exit_code == 0, revoked.output
    assert revoked.stdout.strip() == f"revoked key 'ci' (ic_{ci['prefix']}) of team {name}"
    assert status_with(api_server, ci["key"]) == 401
    assert status_with(api_server, first_key) == 200
    # By name, once more: nothing live is called so.
    again = admin_cli(api_server, "keys", "revoke", name, "ci", token=api_server.admin_token)
    assert again.exit_code == 1 and "has no live key 'ci'" in again.output

    # The team reads what the admin did to it, with its own key.
    log = CliRunner().invoke(
        main,
        ["audit", "--action", "key"],
        env={"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": first_key},
    )
    assert log.exit_code == 0, log.output
    assert log.stdout.splitlines()[0] == "3 changes"
    for action in ("key.revoke", "key.create"):
        assert action in log.stdout
    assert "admin token" in log.stdout

    taken = admin_cli(api_server, "teams", "create", name, token=api_server.admin_token)
    assert taken.exit_code == 1 and f"a team named '{name}' already exists" in taken.output


def test_the_admin_token_is_found_or_asked_for(api_server: Api, tmp_path: Path) -> None:
    # `infercost up` keeps the token in its data dir: used when the variable is not set.
    (tmp_path / "admin.token").write_text(api_server.admin_token + "\n")
    listed = admin_cli(api_server, "teams", "list", data_dir=tmp_path)
    assert listed.exit_code == 0, listed.output

    wrong = admin_cli(api_server, "teams", "list", token="not-the-token")
    assert wrong.exit_code == 1
    assert "not this server's INFERCOST_ADMIN_TOKEN" in wrong.output

    none = admin_cli(api_server, "teams", "list", data_dir=tmp_path / "empty")
    assert none.exit_code == 1
    assert "no admin token: set INFERCOST_ADMIN_TOKEN" in none.output
    assert "docker compose exec api infercost" in none.output
