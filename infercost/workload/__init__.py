"""What each request sends: synthetic lengths and prompts, and the fingerprint that says
whether two workloads measured the same thing."""
