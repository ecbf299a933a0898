"""Webhooks: subscribe a URL to events, read its delivery log, ping it."""
