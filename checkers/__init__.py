"""checkers."""
