"""History of an endpoint's runs over time, and each run's change against its baseline."""
