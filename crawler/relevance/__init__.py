"""Relevance: BM25 kernels, running scores, the focused frontier's priorities, near-duplicates, ranking."""
