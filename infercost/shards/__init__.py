"""A load level split over several worker processes: how requests are dealt (split) and
the shard rows the processes coordinate through (store)."""
