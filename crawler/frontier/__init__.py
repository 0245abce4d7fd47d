"""The frontier: which URL to fetch next and when (sans-IO), its seen-set and per-host pace."""
