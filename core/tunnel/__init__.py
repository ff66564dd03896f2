"""MCP-over-ACP: one browser MCP server carried over the extension's `/acp` socket (``tunnel``), and the
registry of which session has which browser (``registry``)."""
