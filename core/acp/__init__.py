"""ACP on the `/acp` socket, the agent side: control messages (``schema``), one connection's methods and limits
(``server``), the sessions that outlive sockets (``sessions``) and the seam to whatever runs the agent
(``backend``)."""
