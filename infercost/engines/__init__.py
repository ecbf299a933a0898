"""What the project knows about each inference engine, in one place: so far the metric names
each publishes (metrics), read by the endpoint check and the telemetry scraper."""
