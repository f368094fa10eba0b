// koelectra-kit app, teach mode: one review at a time, answered with a key. Uses app.js's helpers ($, el, api,
// drawBars, drawTable, pct, showError). Every answer carries an id made here: a retried request, or a reload
// replaying the answers it never heard back about (kept in localStorage until the server confirms), is kept once.
"use strict";

const PENDING = "koelectra-teach-pending";
const teach = { client: null, item: null, state: null, keys: {}, busy: false, serving: undefined };

const newId = () => (window.crypto && crypto.randomUUID ? crypto.randomUUID()
  : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`);
const json = { "Content-Type": "application/json" };

function tabClient() { // one per tab (sessionStorage): two tabs are shown different reviews
  let id = sessionStorage.getItem("koelectra-teach-client");
  if (!id) { id = newId(); sessionStorage.setItem("koelectra-teach-client", id); }
  return id;
}

const pending = () => JSON.parse(localStorage.getItem(PENDING) || "[]");
const setPending = (list) => localStorage.setItem(PENDING, JSON.stringify(list));

// POST one event; it stays pending only while the server can't be reached (an answer it refused is not retried)
async function sendEvent(body) {
  setPending([...pending().filter((b) => b.answer_id !== body.answer_id), body]);
  let response;
  try {
    response = await fetch("/api/teach/answer", { method: "POST", headers: json, body: JSON.stringify(body) });
  } catch (e) {
    throw new Error("the app is not answering (was it stopped?); the answer is kept here and sent when it is back");
  }
  setPending(pending().filter((b) => b.answer_id !== body.answer_id));
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || `the server answered ${response.status}`);
  return answer;
}

async function replayPending() {
  for (const body of pending()) {
    try { await sendEvent({ ...body, client: teach.client }); } catch (e) { return; }
  }
}

function keyMap(labels) { // 1, 2, 3 ... and each label's first letter where no other label (nor s, u) shares it
  const keys = {};
  labels.forEach((l, i) => { keys[String(i + 1)] = l; });
  const firsts = labels.map((l) => l[0].toLowerCase());
  labels.forEach((l, i) => {
    const f = firsts[i];
    if (/\p{L}/u.test(f) && !["s", "u"].includes(f) && firsts.filter((x) => x === f).length === 1) keys[f] = l;
  });
  return keys;
}

async function act(action, label = null) {
  if (teach.busy || !teach.item && action !== "undo") return;
  teach.busy = true;
  showError("teach-error", "");
  const body = { client: teach.client, action, answer_id: newId(), row: teach.item ? teach.item.row : null, label };
  try {
    const r = await sendEvent(body);
    showItem(r.item);
    showState(r.state);
  } catch (e) {
    showError("teach-error", e.message);
  } finally {
    teach.busy = false;
  }
}

function showItem(item) {
  teach.item = item;
  $("teach-card").hidden = !item;
  if (!item) return;
  $("teach-card").dataset.row = item.row;
  $("teach-text").textContent = item.text;
  $("teach-guess-line").hidden = item.guess == null;
  if (item.guess != null) {
    $("teach-guess").textContent = item.guess;
    $("teach-guess").className = `pill ${labelClass(item.guess)}`;
    $("teach-confidence").textContent = `confidence ${pct(item.confidence)} (${item.source})`;
  }
}

function showState(s) {
  teach.state = s;
  $("teach-pool").textContent = `${s.pool} · ${s.rows.toLocaleString()} rows · column “${s.text_column}”`;
  $("teach-file").textContent = s.labels_file;
  $("teach-source").textContent = s.source === "random"
    ? "No classifier yet: these are a seeded random sample of the file (no repeated or near-duplicate reviews). " +
      "The first retrain makes a classifier; from then on the model asks for the reviews it is least sure about."
    : `Asking for the reviews ${s.source} is least sure about (${s.strategy === "margin"
      ? "smallest gap between its two likeliest labels" : s.strategy} first; no repeats or near-duplicates).`;
  showError("teach-problem", s.problem || "");
  $("teach-total").textContent = s.labelled.toLocaleString();
  drawBars($("teach-counts"), s.labels.map((name) => ({
    name, fraction: s.counts[name] / Math.max(1, s.labelled), text: s.counts[name].toLocaleString(),
  })));
  $("teach-progress-text").textContent = `${s.skipped} skipped · ${s.remaining.toLocaleString()} reviews not yet ` +
    "answered" + (s.scoring ? ` · the model is reading the file: ${s.scoring.done.toLocaleString()} / ` +
      `${s.scoring.total.toLocaleString()}` : "");
  const r = s.retrain;
  $("teach-serving").textContent = s.serving || "none yet";
  const running = r.state === "running";
  $("retrain-progress").hidden = !running;
  $("retrain-progress").value = Math.round(100 * (r.progress || 0));
  $("retrain-text").textContent = running ? `retraining ${r.round || ""}: ${r.message}`
    : s.waiting_for ? `Waiting: ${s.waiting_for}.`
      : `Next retrain after ${s.next_retrain_in} more label${s.next_retrain_in === 1 ? "" : "s"} (every ${s.retrain_every}).`;
  showError("retrain-error", r.state === "failed" ? r.message : "");
  $("retrain-btn").disabled = running || !!s.waiting_for;
  $("label-pool-btn").disabled = !s.serving;
  $("label-pool-btn").textContent = `Label the whole file (${s.pool})` + (s.serving ? ` with ${s.serving}` : "");
  $("teach-dev").textContent = s.dev || "the held-out 10% of the labels";
  drawRounds(s.rounds);
  if (!teach.item) {
    $("teach-empty").hidden = false;
    $("teach-empty").textContent = s.remaining ? "Fetching the next review …"
      : "Every review in the file is answered or skipped.";
  } else {
    $("teach-empty").hidden = true;
  }
  if (s.serving !== teach.serving) { // a new model: the rest of the page uses it too
    const first = teach.serving === undefined;
    teach.serving = s.serving;
    if (!first) refreshInfo();
  }
}

function drawRounds(rounds) {
  const names = ["encoder", "tfidf", "ensemble"];
  drawTable($("rounds-table"), ["round", "labels", "recipe", "serving", ...names.map((n) => `macro-F1 ${n}`),
    "seconds"],
    rounds.map((r) => [r.name, r.labels, r.recipe || "full", r.state === "done" ? r.best : `failed: ${r.message}`,
      ...names.map((n) => (r.scores[n] == null ? "" : r.scores[n])), r.seconds]));
  const svg = $("rounds-chart");
  svg.replaceChildren();
  const done = rounds.filter((r) => r.state === "done");
  const ns = "http://www.w3.org/2000/svg";
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text != null) node.textContent = text;
    svg.appendChild(node);
  };
  svg.hidden = !done.length;
  if (!done.length) return;
  const maxLabels = Math.max(...done.map((r) => r.labels), 1);
  const x = (r) => 40 + (590 * r.labels) / maxLabels;
  const y = (f) => 105 - 95 * f;
  add("text", { x: 2, y: 14 }, "1.0");
  add("text", { x: 2, y: 108 }, "0.0");
  add("text", { x: 560, y: 118 }, `${maxLabels} labels`);
  const best = done.map((r) => r.scores[r.best]);
  add("polyline", { points: done.map((r, i) => `${x(r)},${y(best[i])}`).join(" "), fill: "none",
    stroke: "#2f6fed", "stroke-width": 2 });
  done.forEach((r, i) => add("circle", { cx: x(r), cy: y(best[i]), r: 3.5, fill: "#2f6fed" }));
}

async function refreshInfo() {
  try {
    info = await api("/api/info");
    $("model-name").textContent = info.model;
    for (const id of ["try", "file"]) $(id).hidden = !info.classifier;
  } catch (e) { /* the next poll says what is wrong */ }
}

async function fetchNext() {
  if (teach.busy) return;
  try {
    const r = await api("/api/teach/next", { method: "POST", headers: json,
      body: JSON.stringify({ client: teach.client }) });
    if (!teach.item) showItem(r.item);
    showState(r.state);
  } catch (e) {
    showError("teach-error", e.message);
  }
}

async function pollTeach() {
  try {
    showState(await api("/api/teach"));
    if (!teach.item && teach.state.remaining) await fetchNext();
  } catch (e) { /* a stopped app: the next answer says so */ }
  setTimeout(pollTeach, teach.state && (teach.state.retrain.state === "running" || teach.state.scoring) ? 700 : 2000);
}

function onKey(e) {
  if ($("teach").hidden || e.ctrlKey || e.metaKey || e.altKey) return;
  if (["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
  const key = e.key.toLowerCase();
  if (key === "s") act("skip");
  else if (key === "u" || e.key === "Backspace") act("undo");
  else if (teach.keys[key]) act("answer", teach.keys[key]);
  else return;
  e.preventDefault();
}

async function labelPool() {
  showError("retrain-error", "");
  try {
    resetFile();
    upload = await api("/api/teach/label-pool", { method: "POST" });
    $("progress-box").hidden = false;
    showProgress(upload.job);
    $("file").hidden = false;
    $("file").scrollIntoView();
    poll(); // app.js: the file job's progress, then its results and downloads
  } catch (e) {
    showError("retrain-error", e.message);
  }
}

async function retrainNow() {
  showError("retrain-error", "");
  try { showState(await api("/api/teach/retrain", { method: "POST" })); } catch (e) {
    showError("retrain-error", e.message);
  }
}

async function initTeach() {
  let state;
  try { state = await api("/api/teach"); } catch (e) { return; } // not teach mode (404)
  $("teach").hidden = false;
  teach.client = tabClient();
  teach.keys = keyMap(state.labels);
  $("teach-keys").replaceChildren(...state.labels.map((label, i) => {
    const b = el("button", { type: "button", class: `answer ${labelClass(label)}`, "data-label": label });
    const keys = Object.entries(teach.keys).filter(([, l]) => l === label).map(([k]) => k);
    b.append(...keys.map((k) => el("kbd", { text: k })), document.createTextNode(label));
    b.addEventListener("click", () => act("answer", label));
    return b;
  }), el("button", { type: "button", id: "skip-btn", text: "skip (s)" }),
  el("button", { type: "button", id: "undo-btn", text: "undo (u)" }));
  $("skip-btn").addEventListener("click", () => act("skip"));
  $("undo-btn").addEventListener("click", () => act("undo"));
  $("teach-keyhelp").textContent = Object.entries(teach.keys).map(([k, l]) => `${k} ${l}`).join(" · ");
  $("retrain-btn").addEventListener("click", retrainNow);
  $("label-pool-btn").addEventListener("click", labelPool);
  document.addEventListener("keydown", onKey);
  await replayPending();
  showState(state);
  await fetchNext();
  await refreshInfo();
  pollTeach();
}

initTeach();
