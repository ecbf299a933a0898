"""What the project knows about each inference engine, in one place, and how their streams are
read: the catalog of engines (catalog), their metric names by version (metrics), the body of
a generation request (requests), the server-sent events parser (sse) and the stream reader
(reader) that the endpoint check and the load generator share, and refusals explained
(diagnosis)."""
