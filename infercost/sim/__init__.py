"""Simulated OpenAI-compatible endpoint with known timings, the ground truth for accuracy tests.

Modules: `config` (SimConfig), `wire` (request shapes and pre-encoded events), `app` (the ASGI
app), `server` (serve it with uvicorn, blocking or in-process) and `process` (run it as a
subprocess on a free port, for tests). Nothing heavy is imported here so `infercost --help`
stays fast.
"""
