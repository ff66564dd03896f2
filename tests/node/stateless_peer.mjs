// An independent ACP client built on the official TypeScript SDK: it provides one MCP server in the
// stateless ("Gen-4") MCP-over-ACP form and declares it in session/new, over a real WebSocket.
// Usage: node stateless_peer.mjs <ws-url> <key>
// Prints one JSON line {sessionId, serverId} once the session exists, then serves until stdin closes.
import { client, methods, McpOverAcpProvider } from "@agentclientprotocol/sdk/unstable";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { fromMcpServer } from "@agentclientprotocol/sdk/experimental/mcp-server";
import { McpServer } from "@modelcontextprotocol/server";
import WebSocket from "ws";
import { z } from "zod";

const [url, key] = process.argv.slice(2);
const provider = new McpOverAcpProvider();

function tools() {
  const server = new McpServer({ name: "stateless-tools", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echo the text back", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }),
  );
  server.registerTool(
    "slow",
    { description: "Never answers until cancelled", inputSchema: {} },
    async (_args, extra) =>
      new Promise((resolve) => {
        (extra?.mcpReq?.signal ?? extra?.signal)?.addEventListener("abort", () => {
          process.stdout.write(JSON.stringify({ event: "slow-cancelled" }) + "\n");
          resolve({ content: [{ type: "text", text: "cancelled" }] });
        });
      }),
  );
  return server;
}

const app = client({ name: "stateless-peer" })
  .onRequest(methods.client.mcp.message, provider.handleRequest)
  .onNotification(methods.client.session.update, () => {});

const stream = createWebSocketStream(url, { WebSocket, protocols: [`openab.bearer.${key}`, "acp.v1"] });
await app.connectWith(stream, async (ctx) => {
  await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const registration = provider.registerServer(ctx, { name: "browser", handler: fromMcpServer(tools).handler });
  const session = await ctx.request(methods.agent.session.new, {
    cwd: "/tmp",
    mcpServers: [registration.declaration],
  });
  process.stdout.write(JSON.stringify({ sessionId: session.sessionId, serverId: registration.serverId }) + "\n");
  await new Promise((resolve) => {
    process.stdin.on("end", resolve);
    process.stdin.on("close", resolve);
    process.stdin.resume();
  });
});
process.exit(0);
