"""``python -m openab_browser.core.agents.builtin``: the built-in agent on stdio."""
from .stdio import main

main()
