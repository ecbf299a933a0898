"""Uploaded prompt datasets: parsing, storage and the items a job replays."""
