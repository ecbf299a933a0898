"""GET /v1/audit, and the trail every change writes to."""
