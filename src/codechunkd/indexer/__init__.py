"""indexer stage."""
