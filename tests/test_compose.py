"""docker-compose.yml and the Dockerfile cite only files the project has, and start only
parts the `infercost` command has (the processes docs/operations.md describes)."""

from __future__ import annotations

import re

import yaml

from cli import COMMANDS
from tests.conftest import ROOT

#: A file a comment or setting may name: a path with a known suffix.
_CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:md|yml|yaml|py|toml|ini|txt))\b")


def test_compose_and_dockerfile_cite_only_files_in_the_project() -> None:
    for name in ("docker-compose.yml", "Dockerfile"):
        cited = set(_CITED.findall((ROOT / name).read_text()))
        missing = sorted(c for c in cited if not (ROOT / c).exists() and c != "docker-compose.yml")
        assert not missing, f"{name} cites files the project does not have: {missing}"


def test_compose_starts_the_documented_parts() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    parts = {
        name: service["command"][0]
        for name, service in services.items()
        if service.get("image") == "infercost:local"
    }
    assert parts == {
        "migrate": "migrate",
        "api": "api",
        "worker": "worker",
        "maintenance": "maintenance",
    }
    assert set(parts.values()) <= set(COMMANDS)
    operations = (ROOT / "docs" / "operations.md").read_text()
    for part in parts.values():
        assert f"`infercost {part}`" in operations, part
