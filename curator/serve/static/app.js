// curate serve's pages: the runs list (index.html) and one run (run.html), drawn from the JSON
// API under /api/. Every string from a run (names, reasons, texts, ids) goes in as text nodes,
// never as markup.
"use strict";

const RUNS_EVERY_MS = 2000;
const PROGRESS_EVERY_MS = 1000;
const DETAIL_EVERY_MS = 10000;
const PAGE = 50;

// ---------------------------------------------------------------------------- helpers
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = response.status === 401
      ? "token required: open the address `curate serve` printed (with ?token=...)"
      : (body.error || `HTTP ${response.status}`);
    throw new ApiError(response.status, message);
  }
  return body;
}

function problem(error) {
  const node = $("problem");
  node.hidden = !error;
  node.textContent = error ? String(error.message || error) : "";
}

const number = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en"));

function seconds(s) {
  if (s === null || s === undefined) return "";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

const when = (epoch) => (epoch ? new Date(epoch * 1000).toLocaleString() : "");

function progressText(p) {
  if (!p) return "";
  const parts = [p.label || p.state || ""];
  if (p.total) parts.push(`${number(p.done)}/${number(p.total)} tasks`);
  if (p.docs) parts.push(`${number(p.docs)} documents`);
  if (p.docs_per_s) parts.push(`${number(Math.round(p.docs_per_s))} docs/s`);
  if (p.eta_s) parts.push(`ETA ${seconds(p.eta_s)}`);
  if (typeof p.fraction === "number") parts.push(`${Math.round(p.fraction * 100)} %`);
  return parts.filter(Boolean).join(" · ");
}

function progressBar(p) {
  const bar = el("progress", { max: "1" });
  if (p && typeof p.fraction === "number") bar.value = p.fraction;
  return bar;
}

const runUrl = (name) => `/api/runs/${encodeURIComponent(name)}`;

// ---------------------------------------------------------------------------- runs page
async function refreshRuns() {
  let data;
  try {
    data = await api("/api/runs");
    problem(null);
  } catch (error) {
    problem(error);
    return;
  }
  const rows = data.runs.map((run) => el("tr", { "data-run": run.name },
    el("td", { class: "l" }, el("a", { href: `/runs/${encodeURIComponent(run.name)}`,
                                       text: run.name })),
    el("td", { class: `l status status-${run.status}`, text: run.status }),
    el("td", { class: "l" }, run.status === "running" ? progressBar(run.progress) : null,
       " ", el("span", { class: "note", text: run.status === "running"
         ? progressText(run.progress) : "" })),
    el("td", { class: "l", text: when(run.started) }),
    el("td", { text: seconds(run.duration_s) }),
    el("td", { text: number(run.docs_in) }),
    el("td", { text: number(run.docs_kept) }),
    el("td", { text: number(run.tokens) }),
    el("td", { class: "l", text: run.host || "" }),
    el("td", { class: "wrap", text: run.error || "" })));
  $("runs").tBodies[0].replaceChildren(...rows);
  $("empty").hidden = rows.length > 0;
  $("submit").hidden = !data.submit;
  $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

async function submitRun(event) {
  event.preventDefault();
  const params = new URLSearchParams({ via: $("via").value });
  if ($("via").value === "submit") {
    for (const key of ["system", "nodes", "walltime", "group", "partition", "resource"]) {
      if ($(key).value) params.set(key, $(key).value);
    }
  }
  const result = $("submit-result");
  result.textContent = "starting...";
  try {
    const answer = await api(`/api/runs?${params}`, {
      method: "POST", body: $("yaml").value, headers: { "Content-Type": "application/yaml" },
    });
    result.textContent = `started ${answer.run} (its output: ${answer.log})`;
    refreshRuns();
  } catch (error) {
    result.textContent = `refused: ${error.message}`;
  }
}

function runsPage() {
  $("submit-form").addEventListener("submit", submitRun);
  $("via").addEventListener("change", () => { $("batch").hidden = $("via").value !== "submit"; });
  refreshRuns();
  setInterval(refreshRuns, RUNS_EVERY_MS);
}

// ---------------------------------------------------------------------------- run page
const run = { name: "", state: undefined, started: undefined, stages: [], query: null };

function showProgress(p) {
  $("bar").value = p && typeof p.fraction === "number" ? p.fraction : 0;
  $("progress-text").textContent = progressText(p);
}

async function pollProgress() {
  try {
    const p = await api(`${runUrl(run.name)}/progress`);
    showProgress(p);
    if (p && (p.state !== run.state || p.started !== run.started)) {
      run.state = p.state;
      run.started = p.started;
      refreshDetail();
    }
  } catch (error) {
    problem(error);
  }
}

function fact(list, term, value) {
  if (value !== null && value !== undefined && value !== "") {
    list.append(el("dt", { text: term }), el("dd", { text: String(value) }));
  }
}

async function refreshDetail() {
  let detail;
  try {
    detail = await api(runUrl(run.name));
    problem(null);
  } catch (error) {
    problem(error);
    return;
  }
  const s = detail.summary;
  $("status").textContent = s.status;
  $("status").className = `status status-${s.status}`;
  showProgress(s.progress);
  const facts = $("facts");
  facts.replaceChildren();
  fact(facts, "pipeline", s.pipeline);
  fact(facts, "executor", s.executor);
  fact(facts, "host", s.host);
  fact(facts, "started", when(s.started));
  fact(facts, "duration", seconds(s.duration_s));
  fact(facts, "documents in", number(s.docs_in));
  fact(facts, "documents kept", number(s.docs_kept));
  fact(facts, "tokens", number(s.tokens));
  $("error").hidden = !s.error;
  $("error").textContent = s.error || "";
  const counted = {};
  for (const stage of (detail.stats && detail.stats.stages) || []) counted[stage.name] = stage;
  $("plan").tBodies[0].replaceChildren(...detail.plan.map((stage) => {
    const c = counted[stage.name] || {};
    return el("tr", {},
      el("td", { class: "l", text: stage.name }), el("td", { class: "l", text: stage.type }),
      el("td", { text: stage.segment ?? "" }), el("td", { text: number(c.in) }),
      el("td", { text: number(c.kept) }), el("td", { text: number(c.removed) }),
      el("td", { text: number(c.failed) }), el("td", { text: number(c.tokens) }),
      el("td", { text: c.seconds ? c.seconds.toFixed(1) : "" }));
  }));
  $("log").textContent = (detail.log_tail || []).join("\n");
  $("no-report").hidden = Boolean(detail.report);
  $("report").hidden = !detail.report;
  run.hasReport = Boolean(detail.report);
  if (!$("tab-report").hidden) showReport();
}

function showReport() {
  const frame = $("report");
  if (run.hasReport && !frame.getAttribute("src")) frame.src = `${runUrl(run.name)}/report`;
}

function openTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll(".tab")) {
    section.hidden = section.id !== `tab-${name}`;
  }
  if (name === "report") showReport();
  if (name === "documents" && !run.stages.length) loadStages();
}

// ---------------------------------------------------------------------------- documents
function option(value, label) {
  return el("option", { value, text: label ?? value });
}

async function loadStages() {
  try {
    run.stages = (await api(`${runUrl(run.name)}/stages`)).stages;
  } catch (error) {
    problem(error);
    return;
  }
  $("stage").replaceChildren(...run.stages.map((s) => option(s.name, `${s.name} (${s.type})`)));
  stageChosen();
}

function currentStage() {
  return run.stages.find((s) => s.name === $("stage").value) || {};
}

function stageChosen() {
  const stage = currentStage();
  const reasons = Object.entries(stage.reasons || {});
  $("reason").replaceChildren(option("", "any"), ...reasons.map(
    ([reason, n]) => option(reason, `${reason} (${number(n)})`)));
  $("score-name").replaceChildren(option("", "none"),
    ...(stage.score_columns || []).map((c) => option(c)));
  const kept = document.querySelector("input[name=removed][value=false]");
  kept.disabled = !stage.kept_available;
  kept.parentElement.title = stage.kept_why || "";
  if (!stage.kept_available) {
    document.querySelector("input[name=removed][value=true]").checked = true;
  }
}

function searchParams() {
  const params = new URLSearchParams();
  params.set("stage", $("stage").value);
  params.set("removed", document.querySelector("input[name=removed]:checked").value);
  for (const key of ["reason", "lang", "source", "q"]) {
    const value = $(key).value.trim();
    if (value) params.set(key, value);
  }
  if ($("score-name").value) {
    params.set("score", `${$("score-name").value}:${$("score-min").value}:${$("score-max").value}`);
  }
  return params;
}

function listed(doc) {
  const where = doc.stage ? ` removed by ${doc.stage}${doc.reason ? `: ${doc.reason}` : ""}`
    : " kept";
  return el("li", {},
    el("button", { type: "button", class: "link", text: doc.id,
                   onclick: () => showDocument(doc.id) }),
    el("span", { class: "note", text: where }),
    el("span", { class: "snippet", text: (doc.text || "").slice(0, 240) }));
}

async function search(params, offset) {
  params.set("limit", PAGE);
  params.set("offset", offset);
  run.query = params;
  let answer;
  try {
    answer = await api(`${runUrl(run.name)}/documents?${params}`);
    problem(null);
  } catch (error) {
    problem(error);
    return;
  }
  const list = $("doc-list");
  if (!offset) list.replaceChildren();
  list.append(...answer.documents.map(listed));
  run.offset = offset + answer.documents.length;
  const matched = answer.matched === null ? `more than ${number(run.offset)}`
    : number(answer.matched);
  $("doc-summary").textContent = answer.available === false ? answer.why
    : `${number(list.children.length)} shown of ${matched} matching`;
  $("more").hidden = !answer.has_more;
}

async function find(event) {
  event.preventDefault();
  const value = $("find").value.trim();
  if (!value) return;
  if (!/^https?:\/\//i.test(value)) {
    await showDocument(value);
    return;
  }
  // a URL: removed by any stage, or among the run's final documents
  const found = [];
  try {
    for (const removed of ["true", "false"]) {
      const params = new URLSearchParams({ url: value, removed, limit: PAGE });
      found.push(...(await api(`${runUrl(run.name)}/documents?${params}`)).documents);
    }
    problem(null);
  } catch (error) {
    problem(error);
    return;
  }
  $("doc-list").replaceChildren(...found.map(listed));
  $("doc-summary").textContent = `${number(found.length)} documents with this URL`;
  $("more").hidden = true;
  if (found.length) await showDocument(found[0].id);
}

function table(body, entries) {
  body.replaceChildren(...entries.map(([key, value]) => el("tr", {},
    el("th", { class: "l", text: key }),
    el("td", { class: "wrap", text: typeof value === "object" && value !== null
      ? JSON.stringify(value) : String(value ?? "") }))));
}

function diff(ops) {
  const tags = { "=": "span", "-": "del", "+": "ins" };
  return el("pre", { class: "diff text" },
    ...ops.map(([op, text]) => el(tags[op] || "span", { text })));
}

async function showDocument(id) {
  let doc;
  try {
    doc = await api(`${runUrl(run.name)}/documents/${encodeURIComponent(id)}`);
    problem(null);
  } catch (error) {
    problem(error);
    return;
  }
  $("doc-view").hidden = false;
  $("doc-id").textContent = doc.id;
  const end = doc.end || {};
  $("doc-where").textContent = end.status === "removed"
    ? `removed by ${end.stage}${end.reason ? `: ${end.reason}` : ""} (${end.file})`
    : `${end.status === "kept" ? "kept in the output" : "last seen"} (${end.file})`;
  $("doc-text").textContent = doc.text ?? "(text not kept: `rejected: ids` keeps a sample)";
  $("doc-history").replaceChildren(...(doc.history || []).map((step) => el("section",
    { class: "history" }, el("h3", { text: `rewritten by ${step.stage}` }),
    step.diff ? diff(step.diff) : el("p", { class: "note", text: "text not kept" }))));
  table($("doc-scores").tBodies[0], Object.entries(doc.scores || {}).flatMap(
    ([stage, values]) => Object.entries(values).map(([name, v]) => [`${stage}: ${name}`, v])));
  table($("doc-columns").tBodies[0], Object.entries(doc.columns || {}));
  $("doc-view").scrollIntoView({ block: "nearest" });
}

function runPage() {
  run.name = decodeURIComponent(location.pathname.slice("/runs/".length));
  $("name").textContent = run.name;
  document.title = `curator: ${run.name}`;
  for (const button of document.querySelectorAll(".tabs button")) {
    button.addEventListener("click", () => openTab(button.dataset.tab));
  }
  $("stage").addEventListener("change", stageChosen);
  $("doc-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search(searchParams(), 0);
  });
  $("more").addEventListener("click", () => search(run.query, run.offset));
  $("find-form").addEventListener("submit", find);
  refreshDetail();
  pollProgress();
  setInterval(pollProgress, PROGRESS_EVERY_MS);
  setInterval(refreshDetail, DETAIL_EVERY_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "runs") runsPage();
  else runPage();
});
