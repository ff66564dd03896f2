"""openab.core."""
