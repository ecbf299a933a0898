"""Runs: one load level's measurement, its summary and raw samples."""
