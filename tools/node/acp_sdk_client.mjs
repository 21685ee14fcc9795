#!/usr/bin/env node
// ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk,
// pinned in ./package.json), used by the project's end-to-end tests to prove
// that the agent interoperates with the official SDK.
//
// It launches an agent command as a subprocess (ACP over stdio, newline-
// delimited JSON-RPC 2.0), drives one scripted scenario through the SDK's own
// client API and reports everything it observed as JSON Lines on stdout, one
// object per line, so that a pytest can assert on it. Diagnostics go to stderr.
//
// Usage:
//   node acp_sdk_client.mjs --cwd DIR --prompt TEXT [--prompt TEXT ...]
//       [--cancel-after-chunks N] [--timeout-ms MS] [--client-capabilities JSON]
//       [--unstable] [--verbose] [--request METHOD JSON ...]
//       [--set-config-option ID VALUE ...]
//       [--permission allow_once|allow_always|reject_once|reject_always|cancelled]
//       -- AGENT_CMD [AGENT_ARGS...]
//
//   --unstable   use the SDK's `@agentclientprotocol/sdk/unstable` entrypoint,
//                whose schema knows the unstable v1 additions (subagent_update,
//                session_message, ...). The default stable entrypoint DROPS
//                session/update notifications of variants it does not know
//                (see "sdk_rejected" below).
//   --verbose    log every raw JSON-RPC message in and out on stderr.
//   --request METHOD JSON   send this request (params JSON) after `initialize` and
//                before `session/new`, in order; its response or error is printed.
//   --set-config-option ID VALUE   send `session/set_config_option {sessionId,
//                configId: ID, value: VALUE}` right after `session/new`, before
//                the prompts, in order; its response or error is printed.
//   --permission KIND  how `session/request_permission` is answered: the first
//                option whose `kind` is KIND is selected (`{outcome: {outcome:
//                "selected", optionId}}`); `cancelled` (the default), or no
//                option of that kind (logged on stderr), answers `{outcome:
//                {outcome: "cancelled"}}`.
//
// Scenario: `initialize` (protocolVersion 1, clientInfo {name: "acp-sdk-e2e"},
// clientCapabilities from --client-capabilities or
// {fs: {readTextFile: false, writeTextFile: false}, terminal: false}),
// `session/new {cwd, mcpServers: []}`, then one `session/prompt` per --prompt,
// in order, each awaited. With --cancel-after-chunks N, a `session/cancel`
// notification is sent right after the N-th `agent_message_chunk` of the
// first prompt on the session created above, and the prompt is awaited as
// usual. Then the agent's stdin is closed and its exit awaited (bounded; it
// is sent SIGTERM, then SIGKILL, if it lingers).
//
// Output lines (payloads are the agent's raw JSON, verbatim, never the SDK's
// parsed copies, which drop unknown fields):
//   {"event":"response","method":M,"result":{...}}   M in initialize, session/new,
//                                                     session/set_config_option, session/prompt
//   {"event":"error","method":M,"error":{"code":..,"message":..,"data":..}}
//   {"event":"notification","method":"session/update","params":{...}}  (any method)
//   {"event":"request","method":M,"params":{...}}    a request from the agent
//   {"event":"cancel_sent","method":"session/cancel","params":{"sessionId":..}}
//   {"event":"sdk_rejected","kind":"notification"|"request","method":M,"params":..}
//        the SDK received this message but refused it before any handler saw it
//        (a session/update failing the SDK's schema is dropped and only logged
//        to stderr; a request failing it is answered -32602 by the SDK)
//   {"event":"connection_closed","method":M,"message":..}  the agent went away
//        while request M was pending
//   {"event":"unmatched_response","message":{...}}   a response to no request of ours
//   {"event":"timeout"}                               --timeout-ms elapsed (last line)
//   {"event":"exit","code":N}                         last line: the agent's exit code
//                                                     (null if killed by a signal)
// Requests from the agent: `session/request_permission` is answered as
// --permission says; any other method gets a JSON-RPC method-not-found error.
//
// Order: lines describing incoming messages appear in the order the messages
// arrived from the agent (the order in which the SDK reads them), each once
// the SDK has delivered it to a handler or to the awaiting request (or has
// refused it). The SDK dispatches each message through a chain of async
// handlers, so a response could in principle overtake the notification just
// before it by a few microtasks; holding lines in arrival order rules that out.
//
// Exit status: 0 scenario ran (even if a prompt got a JSON-RPC error);
// 1 usage error (or a bug in this script); 2 `initialize` or `session/new` failed; 3 timeout;
// 4 the agent closed the connection before the scenario finished.
//
// SDK API used (2.4.0, app API; the old ClientSideConnection class is gone):
//   import { client, methods, ndJsonStream, RequestError, PROTOCOL_VERSION }
//     from "@agentclientprotocol/sdk"   (or ".../unstable" with --unstable)
//   client({ name }) -> ClientApp
//     .onNotification(methods.client.session.update, parser, handler)
//     .onNotification("*", handler)               raw fallback, other methods
//     .onRequest(methods.client.session.requestPermission, handler)
//     .onRequest("*", handler)                    raw fallback, other methods
//     .connect(stream) -> ClientConnection { agent: ClientContext, signal, closed, close() }
//   conn.agent.request(methods.agent.initialize | .session.new
//     | .session.setConfigOption | .session.prompt, params)
//   conn.agent.notify(methods.agent.session.cancel, { sessionId })
//   ndJsonStream(webWritable, webReadable) over the child's stdin/stdout.
// The SDK's stream is wrapped in two pass-through taps (they only observe;
// every message still goes through the SDK) to number incoming messages and
// keep their raw JSON, and to learn the ids of our outgoing requests.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const USAGE =
  "usage: node acp_sdk_client.mjs --cwd DIR --prompt TEXT [--prompt TEXT ...] " +
  "[--cancel-after-chunks N] [--timeout-ms MS] [--client-capabilities JSON] " +
  "[--unstable] [--verbose] [--request METHOD JSON ...] [--set-config-option ID VALUE ...] " +
  "[--permission allow_once|allow_always|reject_once|reject_always|cancelled] " +
  "-- AGENT_CMD [AGENT_ARGS...]";
const CLIENT_NAME = "acp-sdk-e2e";
const CLIENT_VERSION = "0.1.0";
const PERMISSION_KINDS = ["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"];
const EXIT_GRACE_MS = 5000;
const KILL_GRACE_MS = 2000;

const EXIT_OK = 0;
const EXIT_USAGE = 1;
const EXIT_SETUP_FAILED = 2;
const EXIT_TIMEOUT = 3;
const EXIT_CONNECTION_LOST = 4;

function log(...parts) {
  process.stderr.write(`acp_sdk_client: ${parts.join(" ")}\n`);
}

function usageError(message) {
  log(message);
  process.stderr.write(USAGE + "\n");
  process.exit(EXIT_USAGE);
}

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const options = {
    cwd: undefined,
    prompts: [],
    cancelAfterChunks: undefined,
    timeoutMs: 60000,
    clientCapabilities: {
      fs: { readTextFile: false, writeTextFile: false },
      terminal: false,
    },
    unstable: false,
    verbose: false,
    requests: [],
    configOptions: [],
    permission: "cancelled",
    command: [],
  };
  const separator = argv.indexOf("--");
  if (separator < 0) usageError("missing `-- AGENT_CMD`");
  const own = argv.slice(0, separator);
  options.command = argv.slice(separator + 1);
  if (options.command.length === 0) usageError("missing AGENT_CMD after `--`");
  const integer = (flag, text, minimum) => {
    if (!/^\d+$/.test(text ?? "") || Number(text) < minimum) {
      usageError(`${flag} needs an integer >= ${minimum}, got ${JSON.stringify(text)}`);
    }
    return Number(text);
  };
  for (let i = 0; i < own.length; i++) {
    const flag = own[i];
    const takesValue = [
      "--cwd",
      "--prompt",
      "--cancel-after-chunks",
      "--timeout-ms",
      "--client-capabilities",
      "--permission",
    ].includes(flag);
    const value = takesValue ? own[++i] : undefined;
    if (takesValue && value === undefined) usageError(`${flag} needs a value`);
    switch (flag) {
      case "--cwd":
        options.cwd = value;
        break;
      case "--prompt":
        options.prompts.push(value);
        break;
      case "--cancel-after-chunks":
        options.cancelAfterChunks = integer(flag, value, 1);
        break;
      case "--timeout-ms":
        options.timeoutMs = integer(flag, value, 1);
        break;
      case "--client-capabilities":
        try {
          options.clientCapabilities = JSON.parse(value);
        } catch (error) {
          usageError(`--client-capabilities is not JSON: ${error.message}`);
        }
        break;
      case "--unstable":
        options.unstable = true;
        break;
      case "--verbose":
        options.verbose = true;
        break;
      case "--permission":
        if (!PERMISSION_KINDS.includes(value)) {
          usageError(`--permission must be one of ${PERMISSION_KINDS.join("|")}, got ${JSON.stringify(value)}`);
        }
        options.permission = value;
        break;
      case "--set-config-option": {
        const configId = own[++i];
        const optionValue = own[++i];
        if (configId === undefined || optionValue === undefined) {
          usageError("--set-config-option needs ID VALUE");
        }
        options.configOptions.push([configId, optionValue]);
        break;
      }
      case "--request": {
        const method = own[++i];
        const params = own[++i];
        if (method === undefined || params === undefined) usageError("--request needs METHOD JSON");
        try {
          options.requests.push([method, JSON.parse(params)]);
        } catch (error) {
          usageError(`--request ${method}: params are not JSON: ${error.message}`);
        }
        break;
      }
      default:
        usageError(`unknown argument ${JSON.stringify(flag)}`);
    }
  }
  if (options.cwd === undefined) usageError("--cwd is required");
  if (options.prompts.length === 0) usageError("at least one --prompt is required");
  return options;
}

// ---------------------------------------------------------- ordered output
//
// One entry per incoming message, in arrival order, plus entries for lines of
// our own (cancel_sent, connection_closed, ...). An entry is printed once it
// and every entry before it are settled.

class OrderedOutput {
  constructor() {
    this.entries = [];
    this.head = 0;
  }

  add(entry) {
    entry.lines ??= [];
    entry.settled ??= false;
    this.entries.push(entry);
    return entry;
  }

  /** Appends a line that needs no message to settle; prints it in turn. */
  line(object) {
    this.add({ lines: [object], settled: true });
    this.flush();
  }

  settle(entry, ...lines) {
    if (entry.settled) return;
    entry.lines.push(...lines);
    entry.settled = true;
    this.flush();
  }

  flush() {
    while (this.head < this.entries.length && this.entries[this.head].settled) {
      const entry = this.entries[this.head];
      this.entries[this.head] = undefined; // let the raw message go
      this.head += 1;
      for (const object of entry.lines) {
        process.stdout.write(JSON.stringify(object) + "\n");
      }
    }
  }

  /** Settles every entry still waiting (with no line) and prints all. */
  drain() {
    for (let i = this.head; i < this.entries.length; i++) {
      const entry = this.entries[i];
      if (!entry.settled) {
        log(`never delivered by the SDK: ${JSON.stringify(entry.message)}`);
        entry.settled = true;
      }
    }
    this.flush();
  }
}

const nextMacrotask = () => new Promise((resolve) => setImmediate(resolve));

// --------------------------------------------------------------------- main

const options = parseArgs(process.argv.slice(2));
const sdkModule = options.unstable ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk";
const { client, methods, ndJsonStream, RequestError, PROTOCOL_VERSION } = await import(sdkModule);
let sdkVersion = "unknown";
try {
  sdkVersion = JSON.parse(
    readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
  ).version;
} catch {
  // only used for diagnostics
}
log(`using ${sdkModule} ${sdkVersion}, protocol version ${PROTOCOL_VERSION}`);

const out = new OrderedOutput();

// ----- the agent process

const [agentCommand, ...agentArgs] = options.command;
const agent = spawn(agentCommand, agentArgs, {
  stdio: ["pipe", "pipe", "inherit"],
  env: process.env,
});
const agentExited = new Promise((resolve) => {
  agent.on("exit", (code, signal) => {
    if (signal) log(`agent killed by signal ${signal}`);
    resolve(code);
  });
  agent.on("error", (error) => {
    log(`cannot run agent ${JSON.stringify(agentCommand)}: ${error.message}`);
    resolve(null);
  });
});
agent.stdin.on("error", (error) => log(`agent stdin: ${error.message}`));
agent.stdout.on("error", (error) => log(`agent stdout: ${error.message}`));

let finishing = false; // set once we close the agent's stdin on purpose

async function waitForAgentExit() {
  const timer = (ms) => new Promise((resolve) => setTimeout(() => resolve("timeout"), ms).unref());
  if ((await Promise.race([agentExited, timer(EXIT_GRACE_MS)])) === "timeout") {
    log(`agent still running ${EXIT_GRACE_MS} ms after stdin closed; SIGTERM`);
    agent.kill("SIGTERM");
    if ((await Promise.race([agentExited, timer(KILL_GRACE_MS)])) === "timeout") {
      log("agent ignored SIGTERM; SIGKILL");
      agent.kill("SIGKILL");
    }
  }
  return agentExited;
}

// ----- the whole-run timeout

const timeout = setTimeout(() => {
  out.flush();
  log(`timed out after ${options.timeoutMs} ms`);
  if (agent.exitCode === null && agent.signalCode === null) agent.kill("SIGKILL");
  process.stdout.write(JSON.stringify({ event: "timeout" }) + "\n", () => process.exit(EXIT_TIMEOUT));
}, options.timeoutMs);

// ----- the SDK stream, with pass-through taps

const requestEntries = new Map(); // JSON-RPC id of a request from the agent -> entry
const responseEntries = new Map(); // JSON-RPC id of one of our requests -> entry of its response
const notificationEntries = new WeakMap(); // raw params object -> entry
const sentRequestIds = new Map(); // method -> id of our latest request of that method
let connection; // the SDK's ClientConnection

function observeIncoming(message) {
  if (options.verbose) log(`<- ${JSON.stringify(message)}`);
  const entry = out.add({ message });
  const isCall = typeof message.method === "string";
  if (isCall && "id" in message) {
    requestEntries.set(message.id, entry);
  } else if (isCall) {
    const params = message.params;
    if (params !== null && typeof params === "object") notificationEntries.set(params, entry);
  } else if ("id" in message) {
    responseEntries.set(message.id, entry);
  }
  // The SDK handles a message within microtasks of reading it (our handlers
  // are synchronous). Whatever is still unclaimed one macrotask later was
  // refused by the SDK.
  setImmediate(() => {
    if (entry.settled) return;
    if (connection?.signal.aborted) {
      out.settle(entry);
    } else if (isCall) {
      out.settle(entry, {
        event: "sdk_rejected",
        kind: "id" in message ? "request" : "notification",
        method: message.method,
        params: message.params,
      });
    } else {
      out.settle(entry, { event: "unmatched_response", message });
    }
  });
}

function observeOutgoing(message) {
  if (options.verbose) log(`-> ${JSON.stringify(message)}`);
  if (typeof message.method === "string" && "id" in message) {
    sentRequestIds.set(message.method, message.id);
  }
}

/** The entry of a notification, found by its raw params object (or, if it had
 * none, the oldest unsettled notification of that method). */
function notificationEntry(method, params) {
  if (params !== null && typeof params === "object") {
    const entry = notificationEntries.get(params);
    if (entry) return entry;
  }
  for (let i = out.head; i < out.entries.length; i++) {
    const entry = out.entries[i];
    if (entry && !entry.settled && entry.message?.method === method && !("id" in entry.message)) {
      return entry;
    }
  }
  return undefined;
}

const sdkStream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const sdkWriter = sdkStream.writable.getWriter();
const stream = {
  readable: sdkStream.readable.pipeThrough(
    new TransformStream({
      transform(message, controller) {
        observeIncoming(message);
        controller.enqueue(message);
      },
    }),
  ),
  writable: new WritableStream({
    write(message) {
      observeOutgoing(message);
      return sdkWriter.write(message);
    },
    close() {
      return sdkWriter.close();
    },
    abort(reason) {
      return sdkWriter.abort(reason);
    },
  }),
};

// ----- the client app

let sessionId;
let countingChunks = false; // true while the first prompt runs
let chunksSeen = 0;
let cancelSent = false;

function recordNotification(method, params) {
  const entry = notificationEntry(method, params);
  const line = { event: "notification", method, params };
  if (!entry) {
    log(`notification not seen by the tap: ${method}`);
    out.line(line);
    return;
  }
  const lines = [line];
  if (
    method === methods.client.session.update &&
    countingChunks &&
    !cancelSent &&
    options.cancelAfterChunks !== undefined &&
    params?.sessionId === sessionId &&
    params?.update?.sessionUpdate === "agent_message_chunk"
  ) {
    chunksSeen += 1;
    if (chunksSeen === options.cancelAfterChunks) {
      cancelSent = true;
      const cancel = { sessionId };
      connection.agent.notify(methods.agent.session.cancel, cancel).catch((error) => {
        log(`sending session/cancel failed: ${error.message}`);
      });
      lines.push({ event: "cancel_sent", method: methods.agent.session.cancel, params: cancel });
    }
  }
  out.settle(entry, ...lines);
}

/** The answer to a session/request_permission, from its raw params. */
function permissionAnswer(params) {
  if (options.permission === "cancelled") return { outcome: { outcome: "cancelled" } };
  const option = (Array.isArray(params?.options) ? params.options : []).find(
    (candidate) => candidate?.kind === options.permission,
  );
  if (!option) {
    log(`no ${options.permission} option in session/request_permission; answering cancelled`);
    return { outcome: { outcome: "cancelled" } };
  }
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

function recordRequest(method, requestId, parsedParams) {
  const entry = requestEntries.get(requestId);
  requestEntries.delete(requestId);
  // Print the raw params; the SDK's parsed copy lacks unknown fields.
  const params = entry ? entry.message.params : parsedParams;
  const line = { event: "request", method, params };
  if (entry) out.settle(entry, line);
  else out.line(line);
  return params;
}

// The exact session/update handler gets the raw params (identity parser):
// the SDK has already validated them by then, because ClientApp runs every
// session/update through its built-in session router, which parses it with
// the entrypoint's zSessionNotification and drops it (logging "Error handling
// notification ... -32602" to stderr) if that fails.
const app = client({ name: CLIENT_NAME })
  .onNotification(
    methods.client.session.update,
    (raw) => raw,
    ({ method, params }) => recordNotification(method, params),
  )
  .onNotification("*", ({ method, params }) => recordNotification(method, params))
  .onRequest(methods.client.session.requestPermission, ({ method, params, requestId }) => {
    return permissionAnswer(recordRequest(method, requestId, params));
  })
  .onRequest("*", ({ method, params, requestId }) => {
    recordRequest(method, requestId, params);
    throw RequestError.methodNotFound(method);
  });

connection = app.connect(stream);
connection.closed.then(() => {
  if (!finishing) log("the connection to the agent closed");
});

// ----- the scenario

/** Sends request `method` through the SDK and prints the raw response or
 * error; returns {ok: true, result} | {ok: false, lost: boolean}. */
async function call(method, params) {
  let failure;
  try {
    await connection.agent.request(method, params);
  } catch (error) {
    failure = error;
  }
  const id = sentRequestIds.get(method);
  const entry = id === undefined ? undefined : responseEntries.get(id);
  if (entry && !entry.settled) {
    responseEntries.delete(id);
    const raw = entry.message;
    if ("result" in raw) {
      out.settle(entry, { event: "response", method, result: raw.result });
      return { ok: true, result: raw.result };
    }
    out.settle(entry, { event: "error", method, error: raw.error });
    return { ok: false, lost: false };
  }
  // No response arrived: the SDK failed the request locally.
  const error = failure;
  if (error instanceof RequestError) {
    out.line({
      event: "error",
      method,
      error: { code: error.code, message: error.message, data: error.data },
    });
    return { ok: false, lost: false };
  }
  out.line({ event: "connection_closed", method, message: String(error?.message ?? error) });
  return { ok: false, lost: true };
}

async function scenario() {
  const init = await call(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: options.clientCapabilities,
    clientInfo: {
      name: CLIENT_NAME,
      title: `ACP SDK end-to-end client (@agentclientprotocol/sdk ${sdkVersion})`,
      version: CLIENT_VERSION,
    },
  });
  if (!init.ok) return init.lost ? EXIT_CONNECTION_LOST : EXIT_SETUP_FAILED;

  for (const [method, params] of options.requests) {
    const answer = await call(method, params);
    if (!answer.ok && answer.lost) return EXIT_CONNECTION_LOST;
  }

  const session = await call(methods.agent.session.new, { cwd: options.cwd, mcpServers: [] });
  if (!session.ok) return session.lost ? EXIT_CONNECTION_LOST : EXIT_SETUP_FAILED;
  sessionId = session.result?.sessionId;

  for (const [configId, value] of options.configOptions) {
    const answer = await call(methods.agent.session.setConfigOption, { sessionId, configId, value });
    if (!answer.ok && answer.lost) return EXIT_CONNECTION_LOST;
  }

  for (const [index, text] of options.prompts.entries()) {
    countingChunks = index === 0;
    const prompt = await call(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    countingChunks = false;
    if (!prompt.ok && prompt.lost) return EXIT_CONNECTION_LOST;
  }
  return EXIT_OK;
}

let exitStatus;
try {
  exitStatus = await scenario();
} catch (error) {
  log(`internal error: ${error?.stack ?? error}`);
  exitStatus = EXIT_USAGE;
}

// Close the agent's stdin and keep reading its output until it exits, so
// that anything it still says is reported.
finishing = true;
agent.stdin.end();
const exitCode = await waitForAgentExit();
await nextMacrotask();
await nextMacrotask();
connection.close();
out.drain();
clearTimeout(timeout);
out.line({ event: "exit", code: exitCode });
process.exitCode = exitStatus;
