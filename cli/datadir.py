"""The data dir of `infercost up`: its lock and the secrets kept in it (mode 600)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import click
from cryptography.fernet import Fernet

from cli.supervisor import LauncherError
from infercost.settings import Settings

ADMIN_TOKEN_FILE = "admin.token"  # noqa: S105 - a file name, not a secret
SECRET_KEYS_FILE = "secret.keys"  # noqa: S105 - a file name, not a secret
TEAM_KEY_FILE = "default-team.key"
LOCK_FILE = "up.lock"


def write_private(path: Path, text: str) -> bool:
    """Create `path` with mode 600 holding `text`; False if it already exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(text + "\n")
    return True


def read_private(path: Path) -> str | None:
    """The stripped contents of a secret file (tightening its mode to 600), or None."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    if path.stat().st_mode & 0o077:
        click.echo(f"up: {path} was readable by others; setting its mode to 600")
        path.chmod(0o600)
    if not text:
        raise LauncherError(f"{path} is empty: restore it from a backup, or delete it")
    return text


def admin_token(settings: Settings, data_dir: Path) -> tuple[str, str]:
    """The admin token and where it came from: INFERCOST_ADMIN_TOKEN, else the data dir."""
    if settings.admin_token:
        return settings.admin_token, "INFERCOST_ADMIN_TOKEN"
    path = data_dir / ADMIN_TOKEN_FILE
    token = read_private(path)
    if token is None:
        token = secrets.token_urlsafe(32)
        if not write_private(path, token):  # lost a race with another process
            token = read_private(path) or token
    return token, str(path)


def secret_keys(settings: Settings, data_dir: Path) -> str:
    """INFERCOST_SECRET_KEYS, else the Fernet key(s) kept in the data dir (made once)."""
    if settings.secret_keys:
        return ",".join(settings.secret_keys)
    path = data_dir / SECRET_KEYS_FILE
    text = read_private(path)
    if text is None:
        text = Fernet.generate_key().decode()
        if not write_private(path, text):
            text = read_private(path) or text
    for key in text.split(","):
        try:
            Fernet(key.strip().encode())
        except ValueError:
            raise LauncherError(
                f"{path} does not hold valid Fernet keys. Restore it from a backup: API keys "
                "and endpoint credentials stored with it cannot be read without it. To start "
                "afresh instead, delete the whole data dir."
            ) from None
    return text


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock so two launchers never share one data dir."""
    path = data_dir / LOCK_FILE
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise LauncherError(
                f"another `infercost up` (pid {holder}) is using {data_dir}: stop it first, "
                "or set INFERCOST_DATA_DIR to another directory"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
