"""Hostile input at volume against every surface of the pod: `/acp` frames, the proxy's MCP HTTP endpoint, the
bridge socket. Hypothesis drives the real servers (``test_*_fuzz.py``); atheris fuzzes each surface's sans-I/O
core in its own process (``atheris_*.py``, run by ``test_atheris.py``). ``OPENAB_LONG=1`` / ``-m long`` runs
the 100,000-input variants."""
