"""openab.gateway."""
