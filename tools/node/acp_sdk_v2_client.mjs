#!/usr/bin/env node
// ACP **v2** (draft protocol) client built on the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in ./package.json), used by the project's
// end-to-end tests to prove that the agent interoperates with the SDK's own v2
// client. The v1 counterpart is ./acp_sdk_client.mjs; this driver keeps its
// CLI conventions and output format.
//
// It launches an agent command as a subprocess (ACP over stdio, newline-
// delimited JSON-RPC 2.0), drives one scripted scenario through the SDK's v2
// client API (`@agentclientprotocol/sdk/experimental/v2/unstable`, so that the
// unstable v2 updates -- subagent_update, session_message, the `unknown`
// state... -- are accepted) and reports everything it observed as JSON Lines on
// stdout, one object per line, so that a pytest can assert on it. Diagnostics
// go to stderr.
//
// Usage:
//   node acp_sdk_v2_client.mjs --cwd DIR --prompt TEXT [--prompt TEXT ...]
//       [--permission allow_once|allow_always|reject_once|reject_always|cancelled]
//       [--cancel-after-chunks N] [--cancel-child-after-announce] [--resume-replay]
//       [--timeout-ms MS] [--client-capabilities JSON] [--verbose]
//       [--set-config-option ID VALUE ...] -- AGENT_CMD [AGENT_ARGS...]
//
// Scenario, on connection 1 (the agent process started from AGENT_CMD):
//   `initialize {protocolVersion: 2, info: {name: "acp-sdk-v2-e2e", ...},
//   capabilities}` (capabilities from --client-capabilities, default {}),
//   `session/new {cwd, mcpServers: []}`, one `session/set_config_option
//   {sessionId, configId: ID, type: "id", value: VALUE}` per --set-config-option,
//   in order (its response or error is printed), then one `session/prompt` per
//   --prompt, in order. In v2 `session/prompt` answers `{messageId}` once the prompt is
//   inserted; the turn ends with a `state_update` whose state is `idle` on that
//   session. So after each prompt that got a result the driver waits for that
//   idle update before sending the next one. An idle update counts only if a
//   non-idle state (`running`, `requires_action`, ...) was reported on the
//   session since the prompt was sent: a repeated idle snapshot from before the
//   turn does not end it (an agent that never reports `running` therefore runs
//   into --timeout-ms). A prompt answered with an error is not waited for.
//   --cancel-after-chunks N  sends `session/cancel {sessionId}` right after the
//       N-th `agent_message_chunk` of the first prompt's turn on that session.
//   --cancel-child-after-announce  for every child announced by a
//       `subagent_update` (on any session), sends `session/cancel` for the
//       child's sessionId once the child is reported `running` (by a
//       `state_update` on the child session or by the `state` of a
//       `subagent_update` for it); once per child.
//   --resume-replay  after the prompts, closes connection 1 (its agent's stdin;
//       its exit is awaited, as at the end: Codex lets one app-server at a time
//       write a thread, so an agent running a Codex of its own must let go of the
//       session first, or the resume fails with "thread ... already has an
//       active writer"), then starts a SECOND agent process from the same
//       AGENT_CMD (connection 2), sends it `initialize` and `session/resume
//       {sessionId, cwd, mcpServers: [], replayFrom: {type: "start"}}` for the
//       session created above, prints everything it receives with
//       "connection": 2, then closes it.
//   --permission KIND  how `session/request_permission` is answered: the first
//       option whose `kind` is KIND is selected (`{outcome: {outcome:
//       "selected", optionId}}`); `cancelled`, or no option of that kind (logged
//       on stderr), answers `{outcome: {outcome: "cancelled"}}`. Default
//       allow_once.
//   --verbose  log every raw JSON-RPC message in and out on stderr.
// Finally each agent's stdin is closed and its exit awaited (bounded; it is sent
// SIGTERM, then SIGKILL, if it lingers): connection 2 first, then connection 1
// (already closed with --resume-replay; its exit line is still the last line).
//
// Output lines (payloads are the agent's raw JSON, verbatim, never the SDK's
// parsed copies, which drop unknown fields). Lines about connection 2 carry
// "connection": 2 right after "event"; lines about connection 1 have no
// "connection" key.
//   {"event":"response","method":M,"result":{...}}   M in initialize, session/new,
//                                                     session/set_config_option,
//                                                     session/prompt, session/resume
//   {"event":"error","method":M,"error":{"code":..,"message":..,"data":..}}
//   {"event":"notification","method":M,"params":{...}}  any method (session/update,
//        $/cancel_request, ...)
//   {"event":"request","method":M,"params":{...}}    a request from the agent
//   {"event":"answered","method":M,"result":{...}}   what the driver answered to
//        the request on the line before (session/request_permission only)
//   {"event":"cancel_sent","method":"session/cancel","params":{"sessionId":..}}
//   {"event":"child_cancel_sent","sessionId":..}     session/cancel sent for a child
//   {"event":"sdk_rejected","kind":"notification"|"request","method":M,"params":..}
//        the SDK received this message but refused it before any handler saw it
//        (a session/update failing the SDK's v2 schema is dropped and only logged
//        to stderr; a request failing it is answered -32602 by the SDK)
//   {"event":"sdk_rejected","kind":"response","method":M,"message":..}
//        follows the "response" line of a result the SDK refused (its schema
//        parse failed): the driver then treats the request as failed
//   {"event":"connection_closed","method":M,"message":..}  the agent went away
//        while request M was pending (or, for session/prompt, while its turn ran)
//   {"event":"unmatched_response","message":{...}}   a response to no request of ours
//   {"event":"timeout"}                               --timeout-ms elapsed (last line)
//   {"event":"exit","code":N}                         the agent's exit code (null if
//        killed by a signal); connection 1's is the last line
// Requests from the agent other than `session/request_permission` get a JSON-RPC
// method-not-found error (printed as a "request" line, with no "answered" line).
//
// Order: lines describing incoming messages appear in the order the messages
// arrived from the agents (the order in which the SDK reads them), each once the
// SDK has delivered it to a handler or to the awaiting request (or has refused
// it); the SDK dispatches each message through a chain of async handlers, so
// holding lines in arrival order keeps a response from overtaking the
// notification just before it.
//
// Exit status: 0 scenario ran (even if a prompt or the resume got a JSON-RPC
// error); 1 usage error (or a bug in this script); 2 `initialize` or
// `session/new` failed (on either connection); 3 timeout; 4 an agent closed the
// connection before the scenario finished.
//
// SDK API used (2.4.0, experimental v2 app API):
//   import { client, methods, ndJsonStream, RequestError, PROTOCOL_VERSION }
//     from "@agentclientprotocol/sdk/experimental/v2/unstable"
//   client({ name }) -> ClientApp
//     .onNotification("*", handler)   raw fallback; gets every notification,
//        session/update included, with the raw params (v2 refuses a custom
//        parser for a built-in method, so there is no identity-parser trick as
//        in v1; a session/update reaches the fallback only after the ClientApp's
//        built-in session router parsed it with zUpdateSessionNotification)
//     .onRequest(methods.client.session.requestPermission, handler)  (parsed by the SDK)
//     .onRequest("*", handler)        raw fallback, other methods
//     .connect(stream) -> ClientConnection { agent: ClientContext, signal, closed, close() }
//   conn.agent.request(methods.agent.initialize | .session.new | .session.prompt
//     | .session.setConfigOption | .session.resume, params)   (the SDK forces protocolVersion 2 on initialize
//     and parses every result with its v2 schema)
//   conn.agent.notify(methods.agent.session.cancel, { sessionId })
// The SDK's stream is wrapped in two pass-through taps (they only observe; every
// message still goes through the SDK) to number incoming messages and keep their
// raw JSON, and to learn the ids of our outgoing requests.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const USAGE =
  "usage: node acp_sdk_v2_client.mjs --cwd DIR --prompt TEXT [--prompt TEXT ...] " +
  "[--permission allow_once|allow_always|reject_once|reject_always|cancelled] " +
  "[--cancel-after-chunks N] [--cancel-child-after-announce] [--resume-replay] " +
  "[--timeout-ms MS] [--client-capabilities JSON] [--verbose] " +
  "[--set-config-option ID VALUE ...] -- AGENT_CMD [AGENT_ARGS...]";
const SDK_MODULE = "@agentclientprotocol/sdk/experimental/v2/unstable";
const CLIENT_NAME = "acp-sdk-v2-e2e";
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
  process.stderr.write(`acp_sdk_v2_client: ${parts.join(" ")}\n`);
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
    permission: "allow_once",
    cancelAfterChunks: undefined,
    cancelChildAfterAnnounce: false,
    resumeReplay: false,
    timeoutMs: 60000,
    clientCapabilities: {},
    verbose: false,
    configOptions: [],
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
      "--permission",
      "--cancel-after-chunks",
      "--timeout-ms",
      "--client-capabilities",
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
      case "--permission":
        if (!PERMISSION_KINDS.includes(value)) {
          usageError(`--permission must be one of ${PERMISSION_KINDS.join("|")}, got ${JSON.stringify(value)}`);
        }
        options.permission = value;
        break;
      case "--cancel-after-chunks":
        options.cancelAfterChunks = integer(flag, value, 1);
        break;
      case "--cancel-child-after-announce":
        options.cancelChildAfterAnnounce = true;
        break;
      case "--resume-replay":
        options.resumeReplay = true;
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
      case "--verbose":
        options.verbose = true;
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
// One entry per incoming message (of either connection), in arrival order, plus
// entries for lines of our own (cancel_sent, connection_closed, ...). An entry is
// printed once it and every entry before it are settled.

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

function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

// --------------------------------------------------------------------- main

const options = parseArgs(process.argv.slice(2));
const { client, methods, ndJsonStream, RequestError, PROTOCOL_VERSION } = await import(SDK_MODULE);
let sdkVersion = "unknown";
try {
  sdkVersion = JSON.parse(
    readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
  ).version;
} catch {
  // only used for diagnostics
}
log(`using ${SDK_MODULE} ${sdkVersion}, protocol version ${PROTOCOL_VERSION}`);

const out = new OrderedOutput();
const links = [];

// ----- scenario state shared by the handlers (connection 1 only)

let sessionId; // the session created by session/new
let turn; // {sessionId, started, countChunks, idle: deferred} while a prompt's turn runs
let chunksSeen = 0;
let cancelSent = false;
const children = new Map(); // child sessionId -> {running, cancelSent}

/** Scenario reactions to a session/update of connection 1; returns extra lines. */
function reactToUpdate(link, params) {
  const lines = [];
  const update = params?.update;
  const kind = update?.sessionUpdate;
  const onSession = params?.sessionId;

  if (turn && onSession === turn.sessionId && kind === "state_update") {
    if (update.state === "idle") {
      if (turn.started) turn.idle.resolve(update.stopReason);
    } else {
      turn.started = true;
    }
  }

  if (
    turn?.countChunks &&
    !cancelSent &&
    options.cancelAfterChunks !== undefined &&
    onSession === turn.sessionId &&
    kind === "agent_message_chunk"
  ) {
    chunksSeen += 1;
    if (chunksSeen === options.cancelAfterChunks) {
      cancelSent = true;
      const cancel = { sessionId: turn.sessionId };
      link.notify(methods.agent.session.cancel, cancel);
      lines.push({ event: "cancel_sent", method: methods.agent.session.cancel, params: cancel });
    }
  }

  if (options.cancelChildAfterAnnounce) {
    let child;
    if (kind === "subagent_update" && typeof update.sessionId === "string") {
      child = children.get(update.sessionId);
      if (!child) {
        child = { id: update.sessionId, running: false, cancelSent: false };
        children.set(child.id, child);
      }
      if (update.state?.state === "running") child.running = true;
    } else if (kind === "state_update" && children.has(onSession)) {
      child = children.get(onSession);
      if (update.state === "running") child.running = true;
    }
    if (child && child.running && !child.cancelSent) {
      child.cancelSent = true;
      link.notify(methods.agent.session.cancel, { sessionId: child.id });
      lines.push({ event: "child_cancel_sent", sessionId: child.id });
    }
  }
  return lines;
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

// ----- one agent process and its SDK connection

class AgentLink {
  constructor(number) {
    this.number = number;
    this.requestEntries = new Map(); // JSON-RPC id of a request from the agent -> entry
    this.responseEntries = new Map(); // JSON-RPC id of one of our requests -> entry of its response
    this.notificationEntries = new WeakMap(); // raw params object -> entry
    this.sentRequestIds = new Map(); // method -> id of our latest request of that method
    this.finishing = false; // set once we close the agent's stdin on purpose
    this.initSettled = false; // our initialize got its answer (or failed)
    this.deferredChecks = [];

    const [agentCommand, ...agentArgs] = options.command;
    this.process = spawn(agentCommand, agentArgs, {
      stdio: ["pipe", "pipe", "inherit"],
      env: process.env,
    });
    this.exited = new Promise((resolve) => {
      this.process.on("exit", (code, signal) => {
        if (signal) log(`agent ${number} killed by signal ${signal}`);
        resolve(code);
      });
      this.process.on("error", (error) => {
        log(`cannot run agent ${JSON.stringify(agentCommand)}: ${error.message}`);
        resolve(null);
      });
    });
    this.process.stdin.on("error", (error) => log(`agent ${number} stdin: ${error.message}`));
    this.process.stdout.on("error", (error) => log(`agent ${number} stdout: ${error.message}`));

    const sdkStream = ndJsonStream(Writable.toWeb(this.process.stdin), Readable.toWeb(this.process.stdout));
    const sdkWriter = sdkStream.writable.getWriter();
    const link = this;
    const stream = {
      readable: sdkStream.readable.pipeThrough(
        new TransformStream({
          transform(message, controller) {
            link.observeIncoming(message);
            controller.enqueue(message);
          },
        }),
      ),
      writable: new WritableStream({
        write(message) {
          link.observeOutgoing(message);
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

    const app = client({ name: CLIENT_NAME })
      .onNotification("*", ({ method, params }) => this.recordNotification(method, params))
      .onRequest(methods.client.session.requestPermission, ({ method, params, requestId }) => {
        return this.recordRequest(method, requestId, params, (rawParams) => {
          const answer = permissionAnswer(rawParams);
          return [answer, [this.tag({ event: "answered", method, result: answer })]];
        });
      })
      .onRequest("*", ({ method, params, requestId }) => {
        this.recordRequest(method, requestId, params);
        throw RequestError.methodNotFound(method);
      });
    this.connection = app.connect(stream);
    this.connection.closed.then(() => {
      if (!this.finishing) log(`the connection to agent ${number} closed`);
      this.markInitSettled();
    });
  }

  /** Adds "connection": N (N > 1) right after "event". */
  tag(object) {
    if (this.number === 1) return object;
    const { event, ...rest } = object;
    return { event, connection: this.number, ...rest };
  }

  get alive() {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  markInitSettled() {
    if (this.initSettled) return;
    this.initSettled = true;
    for (const check of this.deferredChecks.splice(0)) setImmediate(check);
  }

  observeIncoming(message) {
    if (options.verbose) log(`[${this.number}] <- ${JSON.stringify(message)}`);
    const entry = out.add({ message, link: this });
    const isCall = typeof message.method === "string";
    if (isCall && "id" in message) {
      this.requestEntries.set(message.id, entry);
    } else if (isCall) {
      const params = message.params;
      if (params !== null && typeof params === "object") this.notificationEntries.set(params, entry);
    } else if ("id" in message) {
      this.responseEntries.set(message.id, entry);
    }
    // The SDK handles a message within microtasks of reading it (our handlers
    // are synchronous), except that the v2 client holds incoming requests and
    // notifications until its `initialize` completes. Whatever is still
    // unclaimed one macrotask later (after initialization) was refused.
    const check = () => {
      if (entry.settled) return;
      if (isCall && !this.initSettled && !this.connection.signal.aborted) {
        this.deferredChecks.push(check);
        return;
      }
      if (this.connection.signal.aborted) {
        out.settle(entry);
      } else if (isCall && !("id" in message) && message.method === "$/cancel_request") {
        // Applied by the connection itself; no app handler sees it.
        out.settle(entry, this.tag({ event: "notification", method: message.method, params: message.params }));
      } else if (isCall) {
        out.settle(
          entry,
          this.tag({
            event: "sdk_rejected",
            kind: "id" in message ? "request" : "notification",
            method: message.method,
            params: message.params,
          }),
        );
      } else {
        out.settle(entry, this.tag({ event: "unmatched_response", message }));
      }
    };
    setImmediate(check);
  }

  observeOutgoing(message) {
    if (options.verbose) log(`[${this.number}] -> ${JSON.stringify(message)}`);
    if (typeof message.method === "string" && "id" in message) {
      this.sentRequestIds.set(message.method, message.id);
    }
  }

  /** The entry of a notification, found by its raw params object (or, if it had
   * none, the oldest unsettled notification of that method on this link). */
  notificationEntry(method, params) {
    if (params !== null && typeof params === "object") {
      const entry = this.notificationEntries.get(params);
      if (entry) return entry;
    }
    for (let i = out.head; i < out.entries.length; i++) {
      const entry = out.entries[i];
      if (
        entry &&
        !entry.settled &&
        entry.link === this &&
        entry.message?.method === method &&
        !("id" in entry.message)
      ) {
        return entry;
      }
    }
    return undefined;
  }

  recordNotification(method, params) {
    const entry = this.notificationEntry(method, params);
    const line = this.tag({ event: "notification", method, params });
    const extra = this.number === 1 && method === methods.client.session.update ? reactToUpdate(this, params) : [];
    if (!entry) {
      log(`notification not seen by the tap: ${method}`);
      out.line(line);
      for (const object of extra) out.line(object);
      return;
    }
    out.settle(entry, line, ...extra);
  }

  /** Prints a request from the agent with its raw params; `answer(rawParams)`
   * returns [result, extraLines]. Returns the result. */
  recordRequest(method, requestId, parsedParams, answer) {
    const entry = this.requestEntries.get(requestId);
    this.requestEntries.delete(requestId);
    // Print the raw params; the SDK's parsed copy lacks unknown fields.
    const params = entry ? entry.message.params : parsedParams;
    const [result, extra] = answer ? answer(params) : [undefined, []];
    const line = this.tag({ event: "request", method, params });
    if (entry) {
      out.settle(entry, line, ...extra);
    } else {
      out.line(line);
      for (const object of extra) out.line(object);
    }
    return result;
  }

  notify(method, params) {
    this.connection.agent.notify(method, params).catch((error) => {
      log(`sending ${method} on connection ${this.number} failed: ${error.message}`);
    });
  }

  /** Sends request `method` through the SDK and prints the raw response or
   * error; returns {ok: true, result} | {ok: false, lost: boolean}. */
  async call(method, params) {
    let failure;
    let delivered = false;
    try {
      await this.connection.agent.request(method, params);
      delivered = true;
    } catch (error) {
      failure = error;
    }
    if (method === methods.agent.initialize) this.markInitSettled();
    const id = this.sentRequestIds.get(method);
    const entry = id === undefined ? undefined : this.responseEntries.get(id);
    if (entry && !entry.settled) {
      this.responseEntries.delete(id);
      const raw = entry.message;
      if ("result" in raw) {
        const line = this.tag({ event: "response", method, result: raw.result });
        if (delivered) {
          out.settle(entry, line);
          return { ok: true, result: raw.result };
        }
        // The SDK refused the result (its v2 schema parse failed).
        out.settle(
          entry,
          line,
          this.tag({
            event: "sdk_rejected",
            kind: "response",
            method,
            message: String(failure?.message ?? failure),
          }),
        );
        return { ok: false, lost: false };
      }
      out.settle(entry, this.tag({ event: "error", method, error: raw.error }));
      return { ok: false, lost: false };
    }
    // No response arrived: the SDK failed the request locally.
    const error = failure;
    if (error instanceof RequestError) {
      out.line(
        this.tag({
          event: "error",
          method,
          error: { code: error.code, message: error.message, data: error.data },
        }),
      );
      return { ok: false, lost: false };
    }
    out.line(this.tag({ event: "connection_closed", method, message: String(error?.message ?? error) }));
    return { ok: false, lost: true };
  }

  async initialize() {
    return this.call(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      info: {
        name: CLIENT_NAME,
        title: `ACP SDK v2 end-to-end client (@agentclientprotocol/sdk ${sdkVersion})`,
        version: CLIENT_VERSION,
      },
      capabilities: options.clientCapabilities,
    });
  }

  /** Closes the agent's stdin and keeps reading its output until it exits, so
   * that anything it still says is reported; prints its exit line. */
  async finish() {
    this.finishing = true;
    this.process.stdin.end();
    const timer = (ms) => new Promise((resolve) => setTimeout(() => resolve("timeout"), ms).unref());
    if ((await Promise.race([this.exited, timer(EXIT_GRACE_MS)])) === "timeout") {
      log(`agent ${this.number} still running ${EXIT_GRACE_MS} ms after stdin closed; SIGTERM`);
      this.process.kill("SIGTERM");
      if ((await Promise.race([this.exited, timer(KILL_GRACE_MS)])) === "timeout") {
        log(`agent ${this.number} ignored SIGTERM; SIGKILL`);
        this.process.kill("SIGKILL");
      }
    }
    const code = await this.exited;
    await nextMacrotask();
    await nextMacrotask();
    this.connection.close();
    await nextMacrotask();
    return code;
  }
}

// ----- the whole-run timeout

const timeout = setTimeout(() => {
  out.flush();
  log(`timed out after ${options.timeoutMs} ms`);
  for (const link of links) if (link.alive) link.process.kill("SIGKILL");
  process.stdout.write(JSON.stringify({ event: "timeout" }) + "\n", () => process.exit(EXIT_TIMEOUT));
}, options.timeoutMs);

// ----- the scenario

function openLink() {
  const link = new AgentLink(links.length + 1);
  links.push(link);
  return link;
}

/** Sends one prompt and waits for the end of its turn; returns an exit status
 * or undefined to go on. */
async function promptTurn(link, text, first) {
  const idle = deferred();
  turn = { sessionId, started: false, countChunks: first, idle };
  const lost = link.connection.closed.then(() => "lost");
  try {
    const prompt = await link.call(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    if (!prompt.ok) return prompt.lost ? EXIT_CONNECTION_LOST : undefined;
    if ((await Promise.race([idle.promise.then(() => "idle"), lost])) === "lost") {
      // Let the lines of whatever arrived before the close come first.
      await nextMacrotask();
      out.line(
        link.tag({
          event: "connection_closed",
          method: methods.agent.session.prompt,
          message: "the agent went away before the turn's idle state_update",
        }),
      );
      return EXIT_CONNECTION_LOST;
    }
    return undefined;
  } finally {
    turn = undefined;
  }
}

async function resumeReplay() {
  const link = openLink();
  try {
    const init = await link.initialize();
    if (!init.ok) return init.lost ? EXIT_CONNECTION_LOST : EXIT_SETUP_FAILED;
    const resume = await link.call(methods.agent.session.resume, {
      sessionId,
      cwd: options.cwd,
      mcpServers: [],
      replayFrom: { type: "start" },
    });
    if (!resume.ok && resume.lost) return EXIT_CONNECTION_LOST;
    return EXIT_OK;
  } finally {
    const code = await link.finish();
    out.line(link.tag({ event: "exit", code }));
  }
}

async function scenario(link) {
  const init = await link.initialize();
  if (!init.ok) return init.lost ? EXIT_CONNECTION_LOST : EXIT_SETUP_FAILED;

  const session = await link.call(methods.agent.session.new, { cwd: options.cwd, mcpServers: [] });
  if (!session.ok) return session.lost ? EXIT_CONNECTION_LOST : EXIT_SETUP_FAILED;
  sessionId = session.result?.sessionId;

  for (const [configId, value] of options.configOptions) {
    const answer = await link.call(methods.agent.session.setConfigOption, {
      sessionId,
      configId,
      type: "id",
      value,
    });
    if (!answer.ok && answer.lost) return EXIT_CONNECTION_LOST;
  }

  for (const [index, text] of options.prompts.entries()) {
    const status = await promptTurn(link, text, index === 0);
    if (status !== undefined) return status;
  }
  if (options.resumeReplay) {
    mainExitCode = await link.finish();
    return resumeReplay();
  }
  return EXIT_OK;
}

const main = openLink();
let mainExitCode; // set once connection 1 is closed before the end (--resume-replay)
let exitStatus;
try {
  exitStatus = await scenario(main);
} catch (error) {
  log(`internal error: ${error?.stack ?? error}`);
  exitStatus = EXIT_USAGE;
}

const exitCode = mainExitCode !== undefined ? mainExitCode : await main.finish();
out.drain();
clearTimeout(timeout);
out.line({ event: "exit", code: exitCode });
process.exitCode = exitStatus;
