"""Record: experiment state kept in git (ref layout, result notes, scans, plans)."""
