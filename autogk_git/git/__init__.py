"""Everything that runs git lives in this package."""
