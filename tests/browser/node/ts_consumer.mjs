// An independent consumer of the extension's MCP server in the stateless ("Gen-4") MCP-over-ACP
// form: the official ACP TypeScript SDK as the agent side of /acp, calling the browser's tools
// with its own McpOverAcpCaller. It never uses mcp/connect.
// Usage: node ts_consumer.mjs <site-base-url>
// Prints {"port": N} once listening, then one {"report": ...} line after the calls, then exits.
import http from "node:http";
import { agent, methods, McpOverAcpCaller } from "@agentclientprotocol/sdk/unstable";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeWebSocketUpgradeHandler } from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const [site] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const mcp = new McpOverAcpCaller({ clientInfo: { name: "ts-consumer", version: "1.0.0" } });

async function exercise(client, serverId) {
  const call = (name, args) => mcp.request(client, serverId, "tools/call", { name, arguments: args });
  const report = {};
  try {
    report.discover = await mcp.request(client, serverId, "server/discover", {});
    report.tools = await mcp.request(client, serverId, "tools/list", {});
    report.navigate = await call("browser_navigate", { url: `${site}/form.html` });
    report.snapshot = await call("browser_snapshot", {});
    report.unknown = await call("no_such_tool", {});
  } catch (e) {
    report.failure = String(e && e.message || e);
  }
  out({ report });
  setTimeout(() => process.exit(0), 100);
}

const app = agent({ name: "ts-consumer" })
  .onNotification(methods.agent.mcp.message, mcp.handleNotification)
  .onRequest(methods.agent.initialize, async () => ({
    protocolVersion: 1,
    agentCapabilities: { mcpCapabilities: { acp: true } },
  }))
  .onRequest(methods.agent.session.new, async ({ client, params }) => {
    const declared = (params.mcpServers || []).find((s) => s.type === "acp");
    if (declared) setTimeout(() => exercise(client, declared.serverId), 0);
    return { sessionId: `sess_${crypto.randomUUID()}` };
  });

const acp = new AcpServer({ createAgent: () => app });
const wss = new WebSocketServer({
  noServer: true,
  handleProtocols: (protocols) => (protocols.has("acp.v1") ? "acp.v1" : false),
});
const server = http.createServer((_req, res) => res.writeHead(426).end());
server.on("upgrade", createNodeWebSocketUpgradeHandler(acp, wss));
server.listen(0, "127.0.0.1", () => out({ port: server.address().port }));
setTimeout(() => { out({ report: { failure: "no browser within 60 s" } }); process.exit(1); }, 60_000);
