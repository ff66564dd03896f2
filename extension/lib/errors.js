// A tool failure the agent can act on. It becomes an MCP result with isError, never a protocol
// error, so the model sees the message and can correct itself.
export class ToolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}
