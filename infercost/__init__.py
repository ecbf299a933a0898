"""infercost shared core: settings, database, metric and cost definitions, simulator, CLI."""

__version__ = "0.1.0"
