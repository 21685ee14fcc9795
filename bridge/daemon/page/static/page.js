// The daemon's live page: what the daemon pushes over its WebSocket, drawn; answers sent back.
// No framework, nothing fetched but this page's own files; text always goes in as text.
"use strict";

const state = { threads: new Map(), inbox: [], limits: null, daemon: null, open: null, tail: null, machines: [] };
const seenAsks = new Set();
// Asks whose thread has no title yet (the daemon reads a new thread's first message just
// after its turn begins): notified once the title comes, or after TITLE_WAIT_MS untitled.
const untitledAsks = new Map();
const TITLE_WAIT_MS = 3000;
let socket = null;
let retry = 1000;
let firstHello = true;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// The daemon's secret: given in the address's fragment (`#token=…`, which the browser sends
// to no server), kept in this tab's sessionStorage (this origin's alone, its port included;
// a reload keeps it, another tab or site cannot read it), and taken out of the address bar
// and the history. Never a cookie: the browser would send that to every port of the host.
const SECRET_KEY = "codex-acp-bridge-token";

function takeSecret() {
  const parts = location.hash.slice(1).split("&").filter(Boolean);
  const given = parts.find((part) => part.startsWith("token="));
  let secret = null;
  if (given !== undefined) {
    secret = given.slice("token=".length);
    try { sessionStorage.setItem(SECRET_KEY, secret); } catch (e) { /* storage off: this load only */ }
  } else {
    try { secret = sessionStorage.getItem(SECRET_KEY); } catch (e) { /* storage off */ }
  }
  if (given !== undefined || location.search) {
    const rest = parts.filter((part) => !part.startsWith("token="));  // `#notify` stays
    history.replaceState(null, "", "/" + (rest.length ? "#" + rest.join("&") : ""));
  }
  return secret;
}

const secret = takeSecret();

function connect() {
  if (!secret) { link(false, "no secret: open this page with `codex-acp-bridge status --open`"); return; }
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  socket = new WebSocket(`${scheme}//${location.host}/ws`);
  // The daemon sends nothing, and does nothing asked, until the secret comes first.
  socket.onopen = () => socket.send(JSON.stringify({ type: "token", token: secret }));
  socket.onmessage = (event) => { retry = 1000; receive(JSON.parse(event.data)); };
  socket.onclose = (event) => {
    if (event.code === 1008) {
      // Refused: a daemon that restarted has a new secret; asking again will not help.
      link(false, "refused (the daemon restarted? open this page again with `codex-acp-bridge status --open`)");
      return;
    }
    link(false);
    setTimeout(connect, retry);  // a daemon restarting, or the network
    retry = Math.min(retry * 2, 30000);
  };
}

function link(on, why) {
  const node = $("link");
  node.className = on ? "link on" : "link off";
  node.textContent = on ? "live" : why || "disconnected (a restarted daemon needs `codex-acp-bridge status --open` again)";
}

function send(message) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
}

function receive(message) {
  if (message.type === "refused") { flash(message.reason); return; }
  let structural = message.type === "hello" || (message.gone || []).length > 0;
  if (message.type === "hello") { state.threads.clear(); state.daemon = message.daemon; link(true); }
  const changed = [];
  for (const row of message.threads || []) {
    const before = state.threads.get(row.threadId);
    if (!before || before.state !== row.state || before.since !== row.since || before.parentThreadId !== row.parentThreadId) structural = true;
    state.threads.set(row.threadId, row);
    changed.push(row.threadId);
  }
  for (const id of message.gone || []) state.threads.delete(id);
  if (message.inbox) { notifyNew(message.inbox, message.type === "hello" && firstHello); state.inbox = message.inbox; }
  for (const [id, held] of untitledAsks) if (state.threads.get(held.ask.threadId)?.title) notifyHeld(id);
  if (message.limits) state.limits = message.limits;
  if (message.machines) { state.machines = message.machines; structural = true; }
  if (message.tail && message.tail.threadId === state.open) {
    state.tail = message.tail.entries;
    if (nodes.has(state.open)) drawTail(nodes.get(state.open), state.threads.get(state.open));
  }
  if (message.type === "hello") {
    firstHello = false;
    if (state.open) send({ type: "watch", threadId: state.open });
  }
  draw(structural, changed, Boolean(message.inbox), Boolean(message.limits));
}

function flash(text) {
  const node = $("notice");
  node.textContent = text;
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => { node.textContent = ""; }, 5000);
}

// -- the inbox ------------------------------------------------------------------------

function threadName(id) {
  const row = state.threads.get(id);
  if (!row) return "a thread";
  const title = row.title || "untitled";
  return row.nickname ? `${row.nickname}: ${title}` : title;
}

function drawInbox() {
  const list = $("inbox");
  list.replaceChildren(...state.inbox.map(askCard));
  $("inbox-section").hidden = state.inbox.length === 0;
  $("inbox-count").textContent = state.inbox.length ? `(${state.inbox.length})` : "";
}

function askCard(ask) {
  const row = state.threads.get(ask.threadId) || {};
  const card = el("li", { class: "ask", "data-request-id": String(ask.requestId), "data-kind": ask.kind },
    el("div", { class: "who" }, threadName(ask.threadId)),
    el("div", { class: "where" }, `${row.cwd || ""} · asked ${age(ask.askedAt)} ago`));
  if (ask.reason) card.append(el("div", { class: "reason" }, ask.reason));
  if (ask.kind === "command") {
    card.append(el("pre", { class: "command" }, ask.command), el("div", { class: "where" }, `in ${ask.cwd}`));
  } else if (ask.kind === "patch") {
    for (const change of ask.changes || []) card.append(el("div", { class: "where" }, `${change.kind} ${change.path}`), diff(change.diff));
    if (!(ask.changes || []).length) card.append(el("div", { class: "where" }, "a file change"));
  } else if (ask.kind === "question") {
    card.append(questionForm(ask));
    return card;
  }
  const answer = (decision) => () => { send({ type: "answer", requestId: ask.requestId, decision }); };
  card.append(el("div", { class: "buttons" },
    el("button", { class: "allow", "data-decision": "accept", onclick: answer("accept"), disabled: ask.answered ? "" : null }, "Allow once"),
    el("button", { "data-decision": "acceptForSession", onclick: answer("acceptForSession"), disabled: ask.answered ? "" : null }, "Allow for the session"),
    el("button", { class: "reject", "data-decision": "decline", onclick: answer("decline"), disabled: ask.answered ? "" : null }, "Reject"),
    ask.answered ? el("span", { class: "muted" }, "answered…") : null));
  return card;
}

function diff(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of (text || "").split("\n")) {
    const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
    pre.append(cls ? el("span", { class: cls }, line) : line, "\n");
  }
  return pre;
}

function questionForm(ask) {
  const form = el("div", { class: "question" });
  const inputs = [];
  for (const q of ask.questions || []) {
    const input = el("input", { type: "text", "data-question": q.id, placeholder: "your answer" });
    inputs.push([q.id, input]);
    const options = (q.options || []).map((o) => el("button", {
      onclick: () => { input.value = o.label; }, title: o.description || "" }, o.label));
    form.append(el("div", { class: "who" }, q.header || ""), el("div", {}, q.question || ""),
      el("div", { class: "buttons" }, ...options), input);
  }
  form.append(el("div", { class: "buttons" }, el("button", { class: "allow", disabled: ask.answered ? "" : null, onclick: () => {
    const answers = {};
    for (const [id, input] of inputs) answers[id] = input.value ? [input.value] : [];
    send({ type: "answer", requestId: ask.requestId, answers });
  } }, "Answer")));
  return form;
}

// -- the threads ----------------------------------------------------------------------

const URGENCY = { requires_action: 0, running: 1 };

function stateText(row) {
  if (row.state === "requires_action") return `◆ needs ${(row.waitingOn || []).join(" and ") || "you"}`;
  if (row.state === "running") return "● running";
  if (row.state === "idle") {
    const how = row.error ? "failed" : row.ended && row.ended !== "completed" ? row.ended : "";
    return how ? `○ idle · ${how}` : "○ idle";
  }
  return "? unknown";
}

// One node per thread, kept: a row that changes is updated in place; the tree is put in
// order again only when a thread comes, goes, changes state or parent.
const nodes = new Map();

function drawThreads(structural, changed) {
  const rows = [...state.threads.values()];
  for (const [id, node] of nodes) if (!state.threads.has(id)) { node.li.remove(); nodes.delete(id); }
  for (const id of changed) if (state.threads.has(id)) fill(nodeOf(id), state.threads.get(id));
  $("empty").hidden = rows.length > 0;
  if (!structural) return;
  const ids = new Set(rows.map((r) => r.threadId));
  const children = new Map();
  for (const row of rows) {
    const parent = ids.has(row.parentThreadId) ? row.parentThreadId : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(row);
  }
  const keys = new Map();
  const key = (row, path) => {
    if (keys.has(row.threadId)) return keys.get(row.threadId);
    let urgency = URGENCY[row.state] ?? 2;
    let latest = row.since || row.updatedAt || 0;
    if (!path.has(row.threadId)) {
      for (const child of children.get(row.threadId) || []) {
        const [u, l] = key(child, new Set([...path, row.threadId]));
        urgency = Math.min(urgency, u); latest = Math.max(latest, l);
      }
    }
    keys.set(row.threadId, [urgency, latest]);
    return [urgency, latest];
  };
  const order = (list) => list.sort((a, b) => {
    const [ua, la] = key(a, new Set()); const [ub, lb] = key(b, new Set());
    return ua - ub || lb - la;
  });
  const placed = new Set();
  const place = (parent, into, mine = () => true) => {
    const kids = order(children.get(parent) || []).filter((r) => !placed.has(r.threadId) && mine(r));
    const lis = kids.map((row) => {
      placed.add(row.threadId);
      const node = nodeOf(row.threadId);
      place(row.threadId, node.children);
      node.children.hidden = !node.children.firstChild;
      return node.li;
    });
    if (lis.length !== into.children.length || lis.some((li, i) => into.children[i] !== li)) into.replaceChildren(...lis);
  };
  if (!state.machines.length) { place(null, $("threads")); return; }
  // With machines, the roots are grouped by the machine they work on (a sub-agent under
  // its parent, where Codex starts it); every machine shows, with its link's state.
  const names = new Set(state.machines.map((m) => m.name));
  // A thread on a machine no longer named shows with this machine's.
  const machineOf = (row) => (names.has(row.machine) ? row.machine : "local");
  const groups = ["local", ...names].map((name) => {
    const group = groupOf(name);
    place(null, group.list, (row) => machineOf(row) === name);
    group.list.hidden = !group.list.firstChild;
    return group.li;
  });
  const into = $("threads");
  if (groups.length !== into.children.length || groups.some((li, i) => into.children[i] !== li)) into.replaceChildren(...groups);
}

const groupNodes = new Map();

function groupOf(name) {
  let group = groupNodes.get(name);
  if (!group) {
    group = { head: el("div", { class: "machine-head" }), list: el("ul", { class: "group" }) };
    group.li = el("li", { class: "machine", "data-machine": name }, group.head, group.list);
    groupNodes.set(name, group);
  }
  const machine = state.machines.find((m) => m.name === name);
  const linkState = machine ? machine.state || "idle" : "here";
  group.li.dataset.state = linkState;
  group.head.replaceChildren(
    el("span", { class: "machine-name" }, name === "local" ? "local (this machine)" : name),
    el("span", { class: `link-state ${linkState}` }, machine ? linkState : ""),
    el("span", { class: "muted" }, machine ? [kindAndWhere(machine) || machine.url, machine.description, machine.reason].filter(Boolean).join(" · ") : ""));
  return group;
}

// A machine's kind and where it is, as `status` says them (bridge.machines.kind_and_where):
// "ssh me@devbox"; a place that says its kind already as it is ("podman container devbox").
const SAID_IN_PLACE = ["podman", "docker", "devcontainer", "sandbox"];
function kindAndWhere(machine) {
  const kind = machine.kind || "", where = machine.where || "";
  if (!kind || SAID_IN_PLACE.includes(kind) || where.startsWith(`${kind}://`)) return where;
  return where ? `${kind} ${where}` : kind;
}

function nodeOf(threadId) {
  let node = nodes.get(threadId);
  if (node) return node;
  const cell = (cls) => el("span", { class: cls });
  node = { state: cell("state"), title: cell("title"), age: cell("age"), detail: cell("detail"), said: cell("said"),
    tail: el("div", { class: "tail", hidden: "" }), children: el("ul", { class: "children", hidden: "" }) };
  node.li = el("li", { class: "thread", "data-thread-id": threadId },
    el("div", { class: "row", onclick: () => toggle(threadId) }, node.state, node.title, node.age, node.detail, node.said),
    node.tail, node.children);
  nodes.set(threadId, node);
  fill(node, state.threads.get(threadId));
  return node;
}

function fill(node, row) {
  node.li.dataset.state = row.state;
  node.state.className = `state ${row.state}`;
  node.state.textContent = stateText(row);
  node.title.replaceChildren(row.nickname ? el("span", { class: "nick" }, row.nickname) : "", row.title || (row.nickname ? "" : "untitled"));
  node.age.textContent = row.since || row.updatedAt ? age(row.since || row.updatedAt) : "";
  const where = row.folders && row.folders.length ? `${row.cwd} + ${row.folders.join(", ")}` : row.cwd;
  node.detail.textContent = [where, row.model, row.tokens ? `${row.tokens.toLocaleString()} tokens` : null].filter(Boolean).join(" · ");
  node.said.textContent = row.lastLine || "";
  // The open tail redraws with its own messages; here only when its cancel comes or goes.
  if (state.open === row.threadId && node.cancellable !== Boolean(row.cancellable)) drawTail(node, row);
  node.cancellable = Boolean(row.cancellable);
}

function drawTail(node, row) {
  const box = node.tail;
  box.hidden = false;
  const parts = [];
  if (row.cancellable) {
    parts.push(el("div", { class: "buttons" }, el("button", { class: "cancel", onclick: (e) => {
      e.stopPropagation(); send({ type: "cancel", threadId: row.threadId }); } }, "Cancel its turn")));
  }
  for (const entry of state.tail || []) {
    parts.push(el("div", { class: `entry ${entry.kind}` },
      el("div", { class: "kind" }, entry.kind + (entry.status ? ` · ${entry.status}` : "")),
      el("pre", {}, entry.text)));
  }
  if (!(state.tail || []).length) parts.push(el("div", { class: "muted" }, "Nothing said yet while this page was open."));
  box.replaceChildren(...parts);
}

function toggle(threadId) {
  const before = state.open && nodes.get(state.open);
  if (before) { before.tail.hidden = true; before.tail.replaceChildren(); }
  state.open = state.open === threadId ? null : threadId;
  state.tail = null;
  send({ type: "watch", threadId: state.open });
  if (state.open && nodes.has(state.open)) drawTail(nodes.get(state.open), state.threads.get(state.open));
}

// -- everything else ------------------------------------------------------------------

function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= size) return `${Math.floor(s / size)}${unit}`;
  return `${s}s`;
}

// How long ago a moment (Unix seconds) was.
const age = (moment) => duration(Date.now() / 1000 - moment);

function span(minutes) {
  if (minutes >= 1440) return `${Math.round(minutes / 1440)}d`;
  if (minutes >= 60) return `${Math.round(minutes / 60)}h`;
  return `${minutes}m`;
}

function drawLimits() {
  const box = $("limits");
  const limits = state.limits || {};
  const windows = [["primary", limits.primary], ["secondary", limits.secondary]].filter(([, w]) => w);
  box.hidden = windows.length === 0;
  box.replaceChildren(...windows.map(([name, w]) => {
    const bar = el("span");
    // A width through the DOM, not a style attribute (the page's policy allows none).
    bar.style.width = `${Math.min(100, Math.max(0, w.usedPercent))}%`;
    const resets = w.resetsAt ? ` · resets in ${duration(w.resetsAt - Date.now() / 1000)}` : "";
    return el("span", { class: "limit" }, `${w.windowDurationMins ? span(w.windowDurationMins) : name} limit `,
      el("span", { class: "meter" }, bar), ` ${w.usedPercent}% used${resets}`);
  }));
}

function draw(structural = true, changed = [...state.threads.keys()], inbox = true, limits = true) {
  // A card names its thread: redrawn when the thread's row changes too.
  if (inbox || changed.some((id) => state.inbox.some((a) => a.threadId === id))) drawInbox();
  drawThreads(structural, changed);
  if (limits) drawLimits();
  const rows = [...state.threads.values()];
  const running = rows.filter((r) => r.state === "running").length;
  $("counts").textContent = `${rows.length} threads · ${running} running · ${state.inbox.length} waiting on you`;
  document.title = state.inbox.length ? `(${state.inbox.length}) Codex agents` : "Codex agents";
  const d = state.daemon;
  $("daemon").textContent = d ? `daemon ${d.pid} · Codex ${d.codexVersion || ""} · ${d.state}` : "";
}

function notifyNew(inbox, quiet) {
  const current = new Set(inbox.map((ask) => String(ask.requestId)));
  for (const id of seenAsks) if (!current.has(id)) seenAsks.delete(id);
  for (const [id, held] of untitledAsks) if (!current.has(id)) { clearTimeout(held.timer); untitledAsks.delete(id); }
  for (const ask of inbox) {
    const id = String(ask.requestId);
    if (seenAsks.has(id)) continue;
    seenAsks.add(id);
    if (quiet || !$("notify").checked || !("Notification" in window) || Notification.permission !== "granted") continue;
    const row = state.threads.get(ask.threadId);
    if (row && !row.title) untitledAsks.set(id, { ask, timer: setTimeout(() => notifyHeld(id), TITLE_WAIT_MS) });
    else notify(ask);
  }
}

function notifyHeld(id) {
  const held = untitledAsks.get(id);
  if (!held) return;
  clearTimeout(held.timer);
  untitledAsks.delete(id);
  notify(held.ask);
}

function notify(ask) {
  const n = new Notification(`Codex waits on you: ${threadName(ask.threadId)}`, { body: ask.command || ask.reason || ask.kind, tag: String(ask.requestId) });
  n.onclick = () => { window.focus(); n.close(); };
}

function setUpNotify() {
  const box = $("notify");
  box.checked = localStorage.getItem("notify") === "1" || location.hash === "#notify";
  const ask = () => {
    localStorage.setItem("notify", box.checked ? "1" : "0");
    if (box.checked && "Notification" in window && Notification.permission === "default") Notification.requestPermission();
  };
  box.addEventListener("change", ask);
  if (box.checked) ask();
}

setUpNotify();
connect();
// How long each state lasted, redrawn twice a minute (nothing else runs while nothing changes).
setInterval(() => { if (!document.hidden) draw(false); }, 30000);
