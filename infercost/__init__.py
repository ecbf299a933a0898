"""infercost shared core: settings, database, the figures and their cost, engine knowledge,
workloads, planning. It imports none of the faces (api, workers) or tools (cli, sim)."""

__version__ = "0.1.0"
