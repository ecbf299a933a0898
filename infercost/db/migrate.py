"""Run Alembic programmatically: `infercost migrate`, `infercost up` and the tests use it."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config


def _project_root() -> Path:
    """The folder holding alembic.ini: the source checkout, else the working directory."""
    source = Path(__file__).resolve().parents[2]
    return source if (source / "alembic.ini").exists() else Path.cwd()


def alembic_config(database_url: str) -> Config:
    """Alembic configuration pointing at this repository's migrations and `database_url`."""
    root = _project_root()
    cfg = Config(str(root / "alembic.ini"))
    cfg.set_main_option("script_location", str(root / "migrations"))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade_head(database_url: str) -> None:
    """Apply every migration not yet applied."""
    command.upgrade(alembic_config(database_url), "head")
