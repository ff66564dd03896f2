"""``python -m openab.core.agents.builtin``: the built-in agent on stdio."""
from .stdio import main

main()
