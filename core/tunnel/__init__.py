"""MCP-over-ACP: the browser's MCP servers carried over the extension's `/acp` socket.

* ``base``: what a tunnel is, whatever its wire form (:class:`~.base.Tunnel`, :class:`~.base.TunnelOwner`);
* ``connection_form`` / ``stateless_form``: one class per wire form;
* ``tunnel``: :func:`~.tunnel.establish`, which picks the form, and the names callers import;
* ``registry``: which session has which tunnel, and the routing of calls and notifications to them.
"""
