"""The audit log: who changed what in a team, and when."""
