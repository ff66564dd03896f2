"""The checks behind scripts/acp-ws-smoke.py (its docstring is the operator's manual), one module per part.

``client``: the connection to the gateway under test and the words a check is written in; one module per section
of checks, in the order they run: ``auth``, ``protocol`` (with the probe for the built-in agent), ``edge_cases``,
``limits``, ``lifecycle``, ``tunnel`` (the mock extension); ``sections``: the table of what runs; ``suite``: runs
each check under its limit and prints the lines and the summary; ``cli``: the flags and the exit codes.

It needs only ``websockets`` and imports nothing of openab's own.
"""
