// One session of a TypeScript SDK 1.x client against a proxy endpoint, as an agent built on that release runs it:
// initialize (the release's own newest revision), tools/list, one tools/call, then DELETE of its MCP session;
// and the same client with a wrong token. Prints one JSON object of what that agent would have seen.
//
//   OPENAB_TEST_TOKEN=... OPENAB_TEST_WRONG_TOKEN=... node client.mjs <sdk package> <url> <tool> <arguments as JSON>
//
// <sdk package> is one of package.json's names for the SDK (`@modelcontextprotocol/sdk`, `sdk-2025-06-18`, ...).
// The tokens (the session's, and one that is not: another session's) come from the environment, so that they are
// not on a command line other processes can read.

const [sdk, url, tool, argumentsJson] = process.argv.slice(2);
const token = process.env.OPENAB_TEST_TOKEN ?? "";
const wrongToken = process.env.OPENAB_TEST_WRONG_TOKEN ?? "";
const { Client } = await import(`${sdk}/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/client/streamableHttp.js`);
const { LATEST_PROTOCOL_VERSION } = await import(`${sdk}/types.js`);

function transportWith(bearer) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  // The oldest releases keep the negotiated revision to themselves: read it off the initialize answer as the
  // client receives it, which is the revision every later request of the session then speaks.
  let deliver;
  const seen = { protocolVersion: null };
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => deliver,
    set: (handler) => {
      deliver = (message, ...rest) => {
        if (message?.id !== undefined && message.result?.protocolVersion !== undefined) {
          seen.protocolVersion ??= message.result.protocolVersion;
        }
        return handler?.(message, ...rest);
      };
    },
  });
  return { transport, seen };
}

const report = { sdkLatest: LATEST_PROTOCOL_VERSION };
const { transport, seen } = transportWith(token);
const client = new Client({ name: "openab-test-client", version: "1.0.0" });
await client.connect(transport);
report.negotiated = seen.protocolVersion;
report.server = client.getServerVersion();
report.sessionId = transport.sessionId ?? null;
report.tools = (await client.listTools()).tools.map((listed) => listed.name);
report.result = await client.callTool({ name: tool, arguments: JSON.parse(argumentsJson) });
const ended = transport.sessionId;
await transport.terminateSession(); // DELETE with the session's id
// After the DELETE the session is gone for the server too: its id must now be unknown (404), not still served.
const after = await fetch(url, {
  method: "POST",
  headers: {
    Authorization: `Bearer ${token}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "Mcp-Session-Id": ended,
  },
  body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
});
report.afterDelete = after.status;
await client.close();

const wrong = transportWith(wrongToken);
const refused = new Client({ name: "openab-test-client", version: "1.0.0" });
try {
  await refused.connect(wrong.transport);
  report.wrongToken = "connected";
} catch (error) {
  report.wrongToken = String(error?.message ?? error);
  report.wrongTokenStatus = typeof error?.code === "number" ? error.code : null; // the HTTP status, where kept
} finally {
  await refused.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
