"""The status board: rolling figures per watched deployment (GET /v1/status)."""
