"""Package data: the git hook template."""
