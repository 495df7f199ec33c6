"""storage stage."""
