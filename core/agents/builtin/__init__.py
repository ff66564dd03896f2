"""The built-in agent: a real ACP agent on stdio (``python -m openab.core.agents.builtin``) that needs no account."""
