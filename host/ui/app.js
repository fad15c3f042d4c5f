// Burrow's inspector: a client of the JSON API, nothing more.
//
// Everything an instance holds (state, rows, events, errors) is written by
// guest code, so this script only ever puts it in the page as text:
// elements are made with `el`, text goes in through text nodes, and no
// string is ever parsed as markup.
"use strict";

const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");

// Timers and sockets of the page shown; closed when another is shown.
let cleanups = [];
function onLeave(fn) {
  cleanups.push(fn);
}

// ---- Building the page ----------------------------------------------------

// An element with attributes (`on*` keys become listeners) and children
// (strings become text nodes; null and false are left out).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "value") node.value = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces what `node` holds (null and false children are left out, as in
// `el`; the DOM's own replaceChildren would write them as text).
function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

function show(...children) {
  fill(main, ...children);
}

function badge(status) {
  const word = String(status || "unknown");
  return el("span", { class: `badge s-${word.replace(/[^a-z-]/g, "")}` }, word);
}

// A JSON value for people: text as it is, anything else as JSON.
function pretty(value) {
  if (value === undefined) return "";
  return JSON.stringify(value, null, 2);
}

// JSON text kept by the host (a step's output, a schedule's arguments):
// shown indented when it parses.
function prettyText(text) {
  if (text === null || text === undefined) return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return String(text);
  }
}

function cell(value) {
  if (value === null || value === undefined) return el("td", { class: "null" }, "NULL");
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return el("td", { class: text.length > 40 ? "wrap" : null }, text);
}

function dataTable(columns, rows) {
  return el(
    "div",
    { class: "scroll" },
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))),
      el("tbody", {}, rows.map((row) => el("tr", {}, row))),
    ),
  );
}

function time(ms) {
  if (ms === null || ms === undefined) return "";
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return String(ms);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function relative(ms) {
  if (ms === null || ms === undefined) return "";
  const seconds = Math.round((ms - Date.now()) / 1000);
  const span = Math.abs(seconds);
  const text =
    span < 90 ? `${span} s` : span < 5400 ? `${Math.round(span / 60)} min` : `${Math.round(span / 3600)} h`;
  return seconds >= 0 ? `in ${text}` : `${text} ago`;
}

function notice(text, isError) {
  return el("p", { class: isError ? "notice error" : "notice", role: isError ? "alert" : "status" }, text);
}

// A server that checks API tokens answers 401 until the inspector has an
// admin token: it asks for one, and keeps it in this tab only.
function failure(error) {
  if (error && error.status === 401) return tokenForm(error);
  const code = error && error.code ? `${error.code}: ` : "";
  return notice(`${code}${error && error.message ? error.message : error}`, true);
}

// ---- The JSON API ---------------------------------------------------------

const enc = encodeURIComponent;

const TOKEN_KEY = "burrow-token";

function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch (_) {
    return "";
  }
}

function tokenForm(error) {
  const input = el("input", { type: "password", autocomplete: "off", spellcheck: "false" });
  return el("form", {
    class: "row",
    onsubmit: (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      route();
    },
  },
  notice(`${error.message}. This server needs an admin API token; it is kept in this tab only.`, true),
  el("label", {}, "API token", input),
  el("button", { type: "submit" }, "Use token"));
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const init = { method, headers: { accept: "application/json" } };
  if (token()) init.headers.authorization = `Bearer ${token()}`;
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = body;
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "unreachable", `the server cannot be reached: ${e.message}`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = text;
    }
  }
  if (!response.ok) {
    const detail = data && data.error ? data.error : {};
    throw new ApiError(response.status, detail.code || `http-${response.status}`, detail.message || String(text));
  }
  return data;
}

function instancePath(actor, key) {
  return `/actors/${enc(actor)}/${enc(key)}`;
}

// ---- Routes ---------------------------------------------------------------
//
// #/                               the actors
// #/a/ACTOR?prefix=P&after=K       a page of an actor's instances
// #/i/ACTOR/KEY/TAB                an instance (TAB: state, tables, queue,
//                                  schedules, workflow, events, call)
// #/i/ACTOR/KEY/tables/TABLE?offset=N

function link(parts, query) {
  let hash = "#/" + parts.map(enc).join("/");
  const pairs = Object.entries(query || {}).filter(([, v]) => v !== undefined && v !== null && v !== "");
  if (pairs.length) hash += "?" + pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join("&");
  return hash;
}

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?", 2);
  const parts = path ? path.split("/").map((p) => decodeURIComponent(p)) : [];
  const query = {};
  for (const pair of (search || "").split("&")) {
    if (!pair) continue;
    const [k, v = ""] = pair.split("=", 2);
    query[decodeURIComponent(k)] = decodeURIComponent(v);
  }
  return { parts, query };
}

function setCrumbs(items) {
  crumbs.replaceChildren();
  items.forEach(([text, href], i) => {
    if (i > 0) crumbs.appendChild(el("span", { class: "sep" }, "/"));
    crumbs.appendChild(href ? el("a", { href }, text) : el("span", {}, text));
  });
  document.title = ["Burrow", ...items.map(([text]) => text)].join(" · ");
}

async function route() {
  for (const fn of cleanups.splice(0)) {
    try {
      fn();
    } catch (_) {
      /* already closed */
    }
  }
  const { parts, query } = parseHash();
  try {
    if (parts[0] === "a" && parts.length === 2) await actorPage(parts[1], query);
    else if (parts[0] === "i" && parts.length >= 3) await instancePage(parts[1], parts[2], parts[3] || "state", parts[4], query);
    else await actorsPage();
  } catch (e) {
    show(failure(e));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

// ---- The actors -----------------------------------------------------------

async function actorsPage() {
  setCrumbs([["actors", "#/"]]);
  const { actors } = await api("GET", "/actors");
  show(
    el("h1", {}, "Actors"),
    actors.length
      ? el("div", { class: "card" }, el("ul", { class: "plain links", id: "actors" },
          actors.map((a) => el("li", {}, el("a", { href: link(["a", a.name]) }, a.name)))))
      : el("p", { class: "muted" }, "The manifest defines no actor."),
  );
}

// ---- An actor's instances -------------------------------------------------

const KEYS_PER_PAGE = 50;

async function actorPage(actor, query) {
  setCrumbs([["actors", "#/"], [actor, link(["a", actor])]]);
  const prefix = query.prefix || "";
  const page = await api(
    "GET",
    `/actors/${enc(actor)}?` +
      new URLSearchParams({ prefix, after: query.after || "", limit: String(KEYS_PER_PAGE) }).toString(),
  );
  const filter = el("input", { name: "prefix", id: "prefix", value: prefix, placeholder: "key prefix", autocomplete: "off" });
  const open = el("input", { name: "key", id: "open-key", placeholder: "any key", autocomplete: "off" });
  show(
    el("h1", {}, actor),
    el("form", {
      class: "row", id: "filter",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = link(["a", actor], { prefix: filter.value });
      },
    }, el("label", {}, "Keys beginning with", filter), el("button", { type: "submit" }, "Filter")),
    el("div", { class: "card" },
      page.keys.length
        ? el("ul", { class: "plain links", id: "keys" },
            page.keys.map((key) => el("li", {}, el("a", { href: link(["i", actor, key, "state"]) }, key))))
        : el("p", { class: "muted" }, prefix ? "No instance's key begins with this prefix." : "No instance yet.")),
    el("div", { class: "pager" },
      query.after ? el("a", { href: link(["a", actor], { prefix }) }, "← first page") : null,
      page.next ? el("a", { id: "next-page", href: link(["a", actor], { prefix, after: page.next }) }, "next page →") : null,
      el("span", { class: "muted" }, `${page.keys.length} shown`)),
    el("h2", {}, "Open an instance"),
    el("form", {
      class: "row",
      onsubmit: (e) => {
        e.preventDefault();
        if (open.value) location.hash = link(["i", actor, open.value, "state"]);
      },
    }, el("label", {}, "Key", open), el("button", { type: "submit", class: "secondary" }, "Open")),
  );
}

// ---- An instance ----------------------------------------------------------

const TABS = ["state", "tables", "queue", "schedules", "workflow", "events", "call"];

async function instancePage(actor, key, tab, sub, query) {
  if (!TABS.includes(tab)) tab = "state";
  setCrumbs([["actors", "#/"], [actor, link(["a", actor])], [key, link(["i", actor, key, "state"])], [tab, null]]);
  const body = el("section", { id: `tab-${tab}` }, el("p", { class: "muted" }, "Loading…"));
  show(
    el("h1", {}, el("span", { class: "muted" }, `${actor} / `), el("span", { class: "mono", id: "instance-key" }, key)),
    el("nav", { class: "tabs", "aria-label": "Views of the instance" },
      TABS.map((t) => el("a", { href: link(["i", actor, key, t]), "aria-current": t === tab ? "page" : null, id: `to-${t}` }, t))),
    body,
  );
  const views = { state: stateView, tables: tablesView, queue: queueView, schedules: schedulesView,
    workflow: workflowView, events: eventsView, call: callView };
  try {
    await views[tab](body, actor, key, sub, query);
  } catch (e) {
    fill(body, failure(e));
  }
}

function refreshButton(onclick) {
  return el("button", { type: "button", class: "secondary", onclick }, "Refresh");
}

async function stateView(body, actor, key) {
  const { state, paused } = await api("GET", instancePath(actor, key));
  const status = el("div", { id: "copy-status" });
  const resume = el("button", { type: "button", id: "resume" }, "Resume");
  resume.onclick = async () => {
    resume.disabled = true;
    try {
      await api("POST", `${instancePath(actor, key)}/resume`);
      await stateView(body, actor, key);
      body.prepend(notice("Resumed: its queue, schedules and workflow go on.", false));
    } catch (e) {
      resume.disabled = false;
      fill(status, failure(e));
    }
  };
  const newKey = el("input", { id: "fork-key", required: true, placeholder: "new key" });
  fill(body,
    paused
      ? el("div", { class: "notice", id: "paused", role: "status" },
          `Paused since ${time(paused.since)} (${paused.reason}): its queue, schedules and workflow wait. `,
          resume)
      : null,
    status,
    el("h2", {}, "State"),
    el("pre", { id: "state" }, state === null ? "null (never set)" : pretty(state)),
    el("p", {}, refreshButton(() => route())),
    el("h2", {}, "Fork"),
    el("p", { class: "muted" }, "A copy as committed now, under a new key, paused until resumed."),
    el("form", {
      class: "row",
      id: "fork",
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await api("POST", `${instancePath(actor, key)}/fork`, JSON.stringify({ key: newKey.value }));
          location.hash = link(["i", actor, newKey.value, "state"]);
        } catch (error) {
          fill(status, failure(error));
        }
      },
    }, el("label", {}, "New key", newKey), el("button", { type: "submit", class: "secondary" }, "Fork")),
  );
}

const ROWS_PER_PAGE = 50;

async function tablesView(body, actor, key, table, query) {
  if (table) return tablePage(body, actor, key, table, query);
  const { tables } = await api("GET", `${instancePath(actor, key)}/tables`);
  fill(body,
    el("h2", {}, "Tables"),
    tables.length
      ? dataTable(["table", "rows", "columns"], tables.map((t) => [
          el("td", {}, el("a", { href: link(["i", actor, key, "tables", t.name]) }, t.name)),
          cell(t.total_rows),
          el("td", { class: "wrap" }, t.columns.join(", ")),
        ]))
      : el("p", { class: "muted" }, "The actor made no table in this instance."),
  );
}

async function tablePage(body, actor, key, table, query) {
  const offset = Math.max(0, parseInt(query.offset || "0", 10) || 0);
  const page = await api("GET", `${instancePath(actor, key)}/tables/${enc(table)}?offset=${offset}&limit=${ROWS_PER_PAGE}`);
  const first = page.rows.length ? offset + 1 : 0;
  const last = offset + page.rows.length;
  fill(body,
    el("p", {}, el("a", { href: link(["i", actor, key, "tables"]) }, "← all tables")),
    el("h2", {}, "Table ", el("span", { class: "mono" }, page.name)),
    dataTable(page.columns, page.rows.map((row) => row.map(cell))),
    el("div", { class: "pager" },
      offset > 0 ? el("a", { href: link(["i", actor, key, "tables", table], { offset: Math.max(0, offset - ROWS_PER_PAGE) }) }, "← previous") : null,
      last < page.total_rows ? el("a", { id: "next-rows", href: link(["i", actor, key, "tables", table], { offset: last }) }, "next →") : null,
      el("span", { class: "muted", id: "row-range" }, `rows ${first}–${last} of ${page.total_rows}`)),
  );
}

async function queueView(body, actor, key) {
  const base = `${instancePath(actor, key)}/queue`;
  const view = await api("GET", base);
  const status = el("div", { id: "queue-status" });
  const act = async (button, method, path, done) => {
    button.disabled = true;
    try {
      await api(method, path);
      await queueView(body, actor, key);
      body.prepend(notice(done, false));
    } catch (e) {
      button.disabled = false;
      fill(status, failure(e));
    }
  };
  const policy = view.policy
    ? `${view.policy.mode}${view.policy.concurrency ? `, ${view.policy.concurrency} at a time per group` : ", no limit per group"}`
    : "fed to the workflow";
  fill(body,
    el("dl", { class: "kv card" },
      el("dt", {}, "policy"), el("dd", {}, policy),
      el("dt", {}, "pending"), el("dd", { id: "pending-count" }, String(view.pending_count)),
      el("dt", {}, "dead letters"), el("dd", { id: "dead-count" }, String(view.dead_letters.length))),
    view.error ? notice(`the queue is stuck: ${view.error}`, true) : null,
    status,
    el("h2", {}, "Pending events"),
    view.pending.length
      ? dataTable(["id", "type", "payload", "priority", "group", "attempts", "next try", "last error"],
          view.pending.map((e) => [cell(e.id), cell(e.type), cell(e.payload), cell(e.priority), cell(e.group),
            cell(e.attempts), cell(e.attempts ? time(e.not_before) : null), cell(e.last_error)]))
      : el("p", { class: "muted" }, "None."),
    view.pending_count > view.pending.length ? el("p", { class: "muted" }, `The first ${view.pending.length} of ${view.pending_count}.`) : null,
    el("h2", {}, "Dead letters"),
    view.dead_letters.length
      ? dataTable(["id", "type", "payload", "attempts", "failed", "error", ""],
          view.dead_letters.map((d) => {
            const requeue = el("button", { type: "button", class: "secondary", "data-requeue": d.id,
              onclick: () => act(requeue, "POST", `${base}/dead-letters/${d.id}/requeue`, `Dead letter ${d.id} is back in the queue.`) }, "Requeue");
            const discard = el("button", { type: "button", class: "danger", "data-discard": d.id,
              onclick: () => {
                if (confirm(`Discard dead letter ${d.id} for good?`)) act(discard, "DELETE", `${base}/dead-letters/${d.id}`, `Dead letter ${d.id} is discarded.`);
              } }, "Discard");
            return [cell(d.id), cell(d.type), cell(d.payload), cell(d.attempts), cell(time(d.failed_at)),
              el("td", { class: "wrap error-text" }, d.error), el("td", {}, el("div", { class: "actions" }, requeue, discard))];
          }))
      : el("p", { class: "muted", id: "no-dead-letters" }, "None."),
    el("p", {}, refreshButton(() => queueView(body, actor, key).catch((e) => fill(body, failure(e))))),
  );
}

async function schedulesView(body, actor, key) {
  const view = await api("GET", `${instancePath(actor, key)}/schedules`);
  fill(body,
    el("h2", {}, "Schedules"),
    el("p", { class: "muted", id: "schedule-count" }, `${view.count} pending`),
    view.schedules.length
      ? dataTable(["id", "action", "arguments", "due", "", "every"],
          view.schedules.map((s) => [cell(s.id), cell(s.action), cell(s.args), cell(time(s.due_at)),
            el("td", { class: "muted" }, relative(s.due_at)), cell(s.every_ms === null ? "once" : `${s.every_ms} ms`)]))
      : el("p", { class: "muted" }, "No schedule is pending."),
    el("p", {}, refreshButton(() => route())),
  );
}

// ---- The workflow's timeline ------------------------------------------------

// History locations nest: `3` is a position of the run, `3/17/0` the first
// position of iteration 17 of the loop at `3`, `5/1/2` the third of branch 1
// of the join or race at `5`.
function timelineTree(history) {
  const nodes = new Map();
  const roots = [];
  for (const entry of history) {
    const node = { entry, scopes: new Map() };
    nodes.set(entry.location, node);
    const parts = entry.location.split("/");
    const parent = parts.length >= 3 ? nodes.get(parts.slice(0, -2).join("/")) : null;
    if (parent) {
      const scope = parts[parts.length - 2];
      if (!parent.scopes.has(scope)) parent.scopes.set(scope, []);
      parent.scopes.get(scope).push(node);
    } else {
      roots.push(node);
    }
  }
  return roots;
}

// A step's outgoing HTTP requests, attempt by attempt.
function requestList(requests) {
  return el("ul", { class: "requests" }, requests.map((r) => {
    const answer = r.status !== null ? String(r.status) : r.outcome;
    const took = r.duration_ms !== null ? ` · ${r.duration_ms} ms` : "";
    return el("li", { class: r.outcome === "answered" ? "" : "error-text" },
      el("span", { class: "muted" }, `#${r.attempt} `),
      el("span", { class: "mono" }, `${r.method} ${r.authority}`),
      ` → ${answer}${took}`);
  }));
}

function entryItem(node, requests) {
  const e = node.entry;
  const rollback = e.kind === "step" && e.name.startsWith("rollback ");
  const meta = [];
  if (e.kind === "step" && e.attempts) meta.push(`${e.attempts} attempt${e.attempts === 1 ? "" : "s"}`);
  if (e.kind === "loop") meta.push(e.status === "done" ? "finished" : `at iteration ${e.attempts}`);
  if (e.kind === "race" && e.status === "done" && e.output !== null) meta.push(`winner: branch ${e.output}`);
  if (e.wake_at) {
    const what = e.kind === "sleep" ? "until" : e.kind === "queue" ? "times out" : e.status === "retrying" ? "retry" : "at";
    meta.push(`${what} ${time(e.wake_at)} (${relative(e.wake_at)})`);
  }
  if (e.failure_kind) meta.push(`failure: ${e.failure_kind}`);
  const item = el("li", { class: `st-${e.status}${rollback ? " rollback" : ""}`, "data-location": e.location, "data-kind": e.kind },
    el("div", { class: "entry-head" },
      el("span", { class: "kind" }, rollback ? "rollback" : e.kind),
      el("span", { class: "name" }, e.name),
      badge(e.status),
      el("span", { class: "muted mono" }, `@${e.location}`)),
    meta.length ? el("div", { class: "entry-meta" }, meta.join(" · ")) : null,
    e.error ? el("div", { class: "entry-meta" }, el("span", { class: "error-text" }, `${e.error_code ? e.error_code + ": " : ""}${e.error}`)) : null,
    requests[e.location] ? requestList(requests[e.location]) : null,
    e.output !== null && e.kind !== "race" ? el("details", {}, el("summary", {}, e.kind === "loop" && e.status !== "done" ? "carried state" : "output"), el("pre", {}, prettyText(e.output))) : null,
  );
  if (node.scopes.size) {
    const scopes = el("div", { class: "scopes" });
    for (const [index, children] of node.scopes) {
      const winner = e.kind === "race" && e.status === "done" && e.output === index;
      const label = e.kind === "loop" ? `iteration ${index}` : `branch ${index}${winner ? " · winner" : ""}`;
      scopes.appendChild(el("div", { class: `scope${winner ? " winner" : ""}` },
        el("div", { class: "scope-label" }, label),
        el("ol", { class: "timeline" }, children.map((child) => entryItem(child, requests)))));
    }
    item.appendChild(scopes);
  }
  return item;
}

async function workflowView(body, actor, key) {
  let timer = null;
  onLeave(() => clearTimeout(timer));
  const render = async () => {
    let view;
    try {
      view = await api("GET", `${instancePath(actor, key)}/workflow`);
    } catch (e) {
      fill(body, failure(e));
      return;
    }
    const live = !["completed", "failed", "diverged"].includes(view.status);
    fill(body,
      el("dl", { class: "kv card" },
        el("dt", {}, "status"), el("dd", { id: "workflow-status" }, badge(view.status)),
        el("dt", {}, "runs"), el("dd", {}, String(view.runs)),
        el("dt", {}, "started"), el("dd", {}, time(view.started_at)),
        el("dt", {}, "last run ended"), el("dd", {}, time(view.updated_at)),
        view.waiting_on ? [el("dt", {}, "waiting on"), el("dd", {}, view.waiting_on)] : null,
        view.wake_at ? [el("dt", {}, "runs again"), el("dd", {}, `${time(view.wake_at)} (${relative(view.wake_at)})`)] : null,
        el("dt", {}, "input"), el("dd", {}, el("pre", {}, prettyText(view.input))),
        view.output !== null ? [el("dt", {}, "output"), el("dd", {}, el("pre", { id: "workflow-output" }, prettyText(view.output)))] : null,
        view.error ? [el("dt", {}, "error"), el("dd", {}, el("pre", { class: "error-text" }, view.error))] : null),
      el("h2", {}, "Timeline"),
      view.history.length
        ? el("ol", { class: "timeline", id: "timeline" }, timelineTree(view.history).map((node) => entryItem(node, view.requests ?? {})))
        : el("p", { class: "muted" }, "Nothing recorded yet."),
      view.history_len > view.history.length ? el("p", { class: "muted" }, `The first ${view.history.length} of ${view.history_len} entries.`) : null,
      el("p", { class: "muted" }, live ? "Following the workflow: this view refreshes every second." : "The workflow is over."),
    );
    if (live) timer = setTimeout(render, 1000);
  };
  await render();
}

// ---- Live events ------------------------------------------------------------

async function eventsView(body, actor, key) {
  const params = el("input", { id: "connect-params", placeholder: '{"name": "inspector"}', autocomplete: "off" });
  const state = el("span", { id: "socket-state" }, badge("closed"));
  const log = el("ul", { class: "plain events", id: "events" });
  const button = el("button", { type: "submit", id: "connect" }, "Connect");
  let socket = null;
  const close = () => {
    if (socket) socket.close();
    socket = null;
  };
  onLeave(close);
  const entry = (text, extra) => {
    log.prepend(el("li", {}, el("span", { class: "when" }, new Date().toISOString().slice(11, 19)), extra || null, text));
    while (log.childElementCount > 500) log.lastElementChild.remove();
  };
  const connect = () => {
    let query = "";
    if (params.value.trim()) {
      try {
        JSON.parse(params.value);
      } catch (e) {
        entry(`the parameters are not JSON: ${e.message}`);
        return;
      }
      query = `?params=${enc(params.value)}`;
    }
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${location.host}${instancePath(actor, key)}/connect${query}`);
    const mine = socket;
    fill(state, badge("connecting"));
    button.textContent = "Disconnect";
    mine.onopen = () => {
      // A browser cannot set a WebSocket's headers: the token goes first.
      if (token()) mine.send(JSON.stringify({ token: token() }));
      fill(state, badge("connected"));
    };
    mine.onmessage = (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch (_) {
        entry(String(message.data));
        return;
      }
      if (frame.connected !== undefined) entry(`connected as ${frame.connected}`);
      else if (frame.error !== undefined) entry(`refused: ${frame.error.code}: ${frame.error.message}`);
      else if (frame.lagged !== undefined) entry(`missed ${frame.lagged} events (reading too slowly)`);
      else entry(JSON.stringify(frame.payload), el("strong", { class: "mono" }, `${frame.event} `));
    };
    mine.onclose = (event) => {
      if (socket === mine) socket = null;
      fill(state, badge("closed"));
      button.textContent = "Connect";
      entry(event.code === 1000 || event.code === 1005 ? "closed" : `closed (${event.code}): refused, or the server is gone; the reason is in GET ${instancePath(actor, key)}/connect's answer`);
    };
  };
  fill(body,
    el("h2", {}, "Live events"),
    el("p", { class: "muted" }, "Connecting runs the actor's connect hook with these parameters (and creates the instance if it does not exist)."),
    el("form", {
      class: "row",
      onsubmit: (e) => {
        e.preventDefault();
        if (socket) close();
        else connect();
      },
    }, el("label", {}, "Parameters (JSON, optional)", params), button),
    el("p", {}, state),
    log,
  );
}

// ---- Calling an action ------------------------------------------------------

async function callView(body, actor, key) {
  const action = el("input", { id: "action", name: "action", required: true, placeholder: "increment", autocomplete: "off" });
  const args = el("textarea", { id: "args", name: "args", spellcheck: "false" });
  args.value = "[]";
  const answer = el("div", { class: "answer", id: "answer", "aria-live": "polite" });
  const submit = el("button", { type: "submit", id: "call" }, "Call");
  fill(body,
    el("h2", {}, "Call an action"),
    el("p", { class: "muted" }, "The call runs like any other: in a transaction of the instance, which it creates if it does not exist."),
    el("form", {
      class: "stack card",
      onsubmit: async (e) => {
        e.preventDefault();
        let text = args.value.trim() || "[]";
        try {
          if (!Array.isArray(JSON.parse(text))) throw new Error("the arguments must be a JSON array");
        } catch (err) {
          answer.className = "answer error";
          fill(answer, el("h3", {}, "Not sent"), el("pre", {}, err.message));
          return;
        }
        submit.disabled = true;
        answer.className = "answer";
        fill(answer, el("p", { class: "muted" }, "Calling…"));
        try {
          const result = await api("POST", `${instancePath(actor, key)}/actions/${enc(action.value)}`, text);
          answer.className = "answer ok";
          fill(answer, el("h3", {}, "Answer"), el("pre", { id: "result" }, pretty(result)));
        } catch (err) {
          answer.className = "answer error";
          fill(answer, el("h3", {}, `Error ${err.status || ""}`), el("pre", { id: "error" }, `${err.code}: ${err.message}`));
        } finally {
          submit.disabled = false;
        }
      },
    },
    el("label", {}, "Action", action),
    el("label", {}, "Arguments (a JSON array)", args),
    el("div", {}, submit)),
    answer,
  );
}
