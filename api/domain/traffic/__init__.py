"""Traffic: import a team's request log, read its rates, peaks and lengths, delete it."""
