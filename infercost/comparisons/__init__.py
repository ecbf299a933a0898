"""Comparisons across runs: figures side by side by deployment and load level, and the
throughput-per-GPU against per-user-speed frontier."""
