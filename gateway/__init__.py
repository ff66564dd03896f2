"""openab_browser.gateway."""
