"""The engine: one run of a crawl, from seeds to stored rows (orchestration only)."""
