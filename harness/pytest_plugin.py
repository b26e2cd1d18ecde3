"""pytest plugin: fixtures for real Kafka clusters (registered via the pytest11 entry point)."""
