"""GET /v1/jobs/{id}/export: a whole job (runs, summaries, samples) as one JSON Lines file."""
