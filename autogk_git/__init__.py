"""autogk: a git repository as an autonomous, statistically honest Triton kernel optimizer."""
from __future__ import annotations

__version__ = "0.1.0"
