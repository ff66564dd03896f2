"""openab.bridge."""
