"""openab_browser.bridge."""
