"""The plan a job asks for: workload, load and SLO."""
