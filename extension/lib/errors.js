// A tool failure the agent can act on. It becomes an MCP result with isError, never a protocol
// error, so the model sees the message and can correct itself.
// `message` is in our words; `page` (optional) is text from the page that goes with it, which the
// agent gets inside an untrusted-content block.
export class ToolError extends Error {
  constructor(code, message, page = '') {
    super(message);
    this.code = code;
    this.page = page;
  }
}
