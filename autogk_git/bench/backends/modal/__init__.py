"""The Modal backend: the app (runs in the container) and the backend (runs here)."""
