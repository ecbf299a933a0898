"""The client commands' exit codes, in one place so scripts can rely on them (documented in
docs/cli-and-api.md): 0 when the command did what was asked and the answer is good news."""

from __future__ import annotations

#: Done, and the outcome is what was asked for (a job that succeeded, a check that passed,
#: an estimate with at least one candidate).
EXIT_OK = 0
#: An error (the API refused, could not be reached, a bad file), a job that failed, or an
#: endpoint whose check failed (`endpoints add`, `endpoints check`, `bench`).
EXIT_FAILED = 1
#: The command line itself was wrong (click's usage errors).
EXIT_USAGE = 2
#: The job was cancelled before it ended.
EXIT_CANCELLED = 3
#: The estimate has no answer: no measured deployment meets the request (the reason is printed).
EXIT_NO_ESTIMATE = 4
#: Watching was stopped with Ctrl-C; the job goes on.
EXIT_INTERRUPTED = 130
