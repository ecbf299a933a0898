"""Where the captured engine answers live: the repository's own captures
(tests/fixtures/engines) and the shared llama-server captures (shared/fixtures/llama-server,
beside the checkout, or above a worktree)."""

from __future__ import annotations

from pathlib import Path

REPO_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "engines"


def shared_llama_server() -> Path:
    """The shared llama-server captures: the first `shared/fixtures/llama-server` found
    beside the checkout or above it."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "fixtures" / "llama-server"
        if candidate.is_dir():
            return candidate
    return here.parents[1].parent / "shared" / "fixtures" / "llama-server"
