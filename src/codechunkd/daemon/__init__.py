"""daemon stage."""
