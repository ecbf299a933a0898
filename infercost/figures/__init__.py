"""The canonical figures: per-request and per-run metrics, cost per token, and the same
figures under other tools' definitions (docs/figures.md)."""
