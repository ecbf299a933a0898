"""Simulated OpenAI-compatible endpoint with known timings, the ground truth for accuracy tests.

Modules: `config` (SimConfig), `wire` (request shapes and pre-encoded events), `app` (the ASGI
app: one request path), `modes` (its fixed and gpu timing models), `gpu` (the modelled GPU
engine), `metrics` (GET /metrics through a prometheus_client registry), `server` (serve it
with uvicorn, blocking or in-process) and `process` (run it as a subprocess on a free port,
for tests). Nothing heavy is imported here so `infercost --help`
stays fast.
"""
