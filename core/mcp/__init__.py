"""The browser tools as an MCP server for the agent: its semantics (``server``), the per-session loopback
Streamable HTTP endpoint (``proxy``) and the seam both access modes implement (``access``)."""
