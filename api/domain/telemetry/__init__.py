"""GPU and engine telemetry scraped during runs."""
