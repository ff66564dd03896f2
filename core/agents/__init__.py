"""The agent CLIs in the pod: how each is run (``recipes``), the child process (``process``), the runtime that
gives each session its agent (``runtime``), permission answers (``permissions``), the CLIs' own MCP config
files (``config``) and the built-in agent (``builtin``)."""
