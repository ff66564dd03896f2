// Preloaded into MCP's conformance suite (`node --import ./bearer.mjs .../conformance server --url ...`): every
// HTTP request it makes carries the session's bearer token, from OPENAB_TEST_TOKEN, as an agent configured with
// the endpoint's `Authorization` header sends it.
//
// The suite (0.1.16) has no option for a header, and the proxy answers nothing without its token; a forwarder in
// between would change the Host and Origin the suite sends, which its DNS-rebinding scenario is about. Both its
// SDK client (fetch) and its raw requests (undici's `request`) go through undici's process-wide dispatcher, which
// this replaces with one that adds the header.

import { Agent, setGlobalDispatcher } from "undici";

const authorization = `Bearer ${process.env.OPENAB_TEST_TOKEN ?? ""}`;

function withBearer(dispatch) {
  return (options, handler) => {
    const given = options.headers;
    let headers;
    if (Array.isArray(given)) {
      // The flat [name, value, name, value, ...] form: drop any Authorization there is, add ours.
      headers = [];
      for (let i = 0; i < given.length; i += 2) {
        if (String(given[i]).toLowerCase() !== "authorization") headers.push(given[i], given[i + 1]);
      }
      headers.push("authorization", authorization);
    } else {
      headers = Object.fromEntries(
        Object.entries(given ?? {}).filter(([name]) => name.toLowerCase() !== "authorization"),
      );
      headers.authorization = authorization;
    }
    return dispatch({ ...options, headers }, handler);
  };
}

setGlobalDispatcher(new Agent().compose(withBearer));
