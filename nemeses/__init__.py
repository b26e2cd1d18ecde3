"""nemeses."""
