"""Review: reading the record back (bisect, report, pick and pack)."""
