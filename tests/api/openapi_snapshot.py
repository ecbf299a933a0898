"""The OpenAPI document as recorded in tests/api/snapshots/openapi.json, and how to record it.

A change that means to change the interface records the document again and the diff shows
what users and generated clients will see:

    .venv/bin/python -m tests.api.openapi_snapshot    # rewrites the snapshot

A change that means not to (a refactor: modules moved, schemas split) leaves it as it is,
and tests/api/test_openapi.py fails on any difference, naming what changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("snapshots") / "openapi.json"

#: Prints the app's OpenAPI document as create_app builds it in a fresh process.
PRINT_DOCUMENT = (
    "import json; from api.app import create_app; "
    "print(json.dumps(create_app().openapi_schema.to_schema(), sort_keys=True, indent=1))"
)


def built_document(env: dict[str, str]) -> str:
    """The document a fresh process builds, in the snapshot's layout."""
    return subprocess.run(
        [sys.executable, "-c", PRINT_DOCUMENT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def differences(recorded: dict[str, Any], built: dict[str, Any]) -> list[str]:
    """What differs, as a person reads it: operations and component schemas added, removed
    or changed, then any other top-level key."""
    lines: list[str] = []

    def compare(kind: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        for name in sorted(old.keys() - new.keys()):
            lines.append(f"{kind} removed: {name}")
        for name in sorted(new.keys() - old.keys()):
            lines.append(f"{kind} added: {name}")
        for name in sorted(old.keys() & new.keys()):
            if old[name] != new[name]:
                lines.append(f"{kind} changed: {name}")

    def ops(document: dict[str, Any]) -> dict[str, Any]:
        return {
            f"{method.upper()} {path}": op
            for path, item in document.get("paths", {}).items()
            for method, op in item.items()
        }

    compare("operation", ops(recorded), ops(built))
    compare(
        "schema",
        recorded.get("components", {}).get("schemas", {}),
        built.get("components", {}).get("schemas", {}),
    )
    for key in sorted((recorded.keys() | built.keys()) - {"paths", "components"}):
        if recorded.get(key) != built.get(key):
            lines.append(f"top-level {key!r} changed")
    return lines


if __name__ == "__main__":
    from cryptography.fernet import Fernet

    env = {
        "DATABASE_URL": "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "INFERCOST_SECRET_KEYS": Fernet.generate_key().decode(),
    }
    SNAPSHOT.write_text(built_document(env))
    print(f"wrote {SNAPSHOT}")
