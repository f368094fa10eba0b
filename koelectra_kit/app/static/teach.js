// koelectra-kit app, teach mode: one review at a time, answered with a key. Uses app.js's helpers ($, el, api,
// drawBars, drawTable, pct, showError). An answer's id belongs to the card it answers (made when the card is shown),
// not to the key press: pressing a key twice on one card, a retried request, or a reload replaying the answers it
// never heard back about (kept in localStorage until the server confirms) is one answer.
"use strict";

const PENDING = "koelectra-teach-pending";
const teach = { client: null, item: null, card: null, state: null, keys: {}, busy: false, serving: undefined };

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
  // one id per card and kind of event: a second press on the same card (the app down, nothing moved) is the same
  // answer (its label the latest pressed), a second undo on the same card the same undo
  const answerId = action === "undo" ? `${teach.card || newId()}-undo` : teach.card;
  const body = { client: teach.client, action, answer_id: answerId, row: teach.item ? teach.item.row : null, label };
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
  if (!item || !teach.item || item.row !== teach.item.row) teach.card = item ? newId() : null; // a new card
  teach.item = item;
  $("teach-card").hidden = !item;
  if (!item) return;
  $("teach-card").dataset.row = item.row;
  $("teach-text").textContent = item.text;
  $("teach-where").textContent = `row ${item.row.toLocaleString()}` + (item.id ? ` · id ${item.id}` : "");
  $("teach-guess-line").hidden = item.guess == null;
  if (item.guess != null) {
    $("teach-guess").textContent = item.guess;
    $("teach-guess").className = `pill ${labelClass(item.guess)}`;
    $("teach-confidence").textContent = `confidence ${pct(item.confidence)} (${item.source})`;
  }
}

function showState(s) {
  teach.state = s;
  const repeats = s.rows - s.distinct - s.empty_rows;
  $("teach-pool").textContent = `${s.pool} · ${s.rows.toLocaleString()} rows · column “${s.text_column}”` +
    (repeats || s.empty_rows ? ` · ${s.distinct.toLocaleString()} distinct reviews (${[
      repeats ? `${repeats.toLocaleString()} repeat${repeats === 1 ? "" : "s"} of another row, asked once` : "",
      s.empty_rows ? `${s.empty_rows.toLocaleString()} empty or unreadable` : ""].filter(Boolean).join(", ")})` : "");
  $("teach-file").textContent = s.labels_file;
  $("teach-source").textContent = s.source === "random"
    ? "No classifier yet: these are a seeded random sample of the file (no repeated or near-duplicate reviews). " +
      "The first retrain makes a classifier; from then on the model asks for the reviews it is least sure about."
    : `Asking for the reviews ${s.source} is least sure about (${s.strategy === "margin"
      ? "smallest gap between its two likeliest labels" : s.strategy} first; no repeats or near-duplicates).` +
    (s.start_note ? ` ${s.start_note}.` : "");
  showError("teach-problem", s.problem || "");
  $("teach-total").textContent = s.labelled.toLocaleString();
  drawBars($("teach-counts"), s.labels.map((name) => ({
    name, fraction: s.counts[name] / Math.max(1, s.labelled), text: s.counts[name].toLocaleString(),
  })));
  $("teach-progress-text").textContent = `${s.labelled} answered · ${s.skipped} skipped · ` +
    `${s.remaining.toLocaleString()} of ${s.distinct.toLocaleString()} distinct reviews not yet answered` + (s.scoring ? ` · the model is reading the file: ${s.scoring.done.toLocaleString()} / ` +
      `${s.scoring.total.toLocaleString()}` : "");
  const r = s.retrain;
  $("teach-serving").textContent = s.serving || "none yet";
  const running = r.state === "running";
  $("retrain-progress").hidden = !running;
  $("retrain-progress").value = Math.round(100 * (r.progress || 0));
  $("retrain-text").textContent = running ? (r.round ? `Retraining ${r.round}: ${r.message}` : "Retrain queued.")
    : s.waiting_for ? `Waiting: ${s.waiting_for}.`
      : `Next retrain after ${s.next_retrain_in} more label${s.next_retrain_in === 1 ? "" : "s"} (every ${s.retrain_every}).`;
  showError("retrain-error", r.state === "failed" ? r.message : "");
  const last = s.rounds[s.rounds.length - 1];
  showError("retrain-note", last && last.state === "done" && !last.served ? `${last.name} ${last.reason}` : "");
  $("retrain-btn").disabled = running || !!s.waiting_for;
  $("label-pool-btn").disabled = !s.serving;
  $("label-pool-btn").textContent = `Label the whole file (${s.pool})` + (s.serving ? ` with ${s.serving}` : "");
  $("teach-dev").textContent = s.dev ? `--dev ${s.dev}` : `${(s.heldout || 0).toLocaleString()} held-out labels ` +
    "(never trained on); TF-IDF rounds are compared by cross-validation on every label the serving model never saw";
  $("teach-start").textContent = s.start_model ? `Starting model ${s.start_model}: macro-F1 ` +
    `${s.start_score == null ? "not scored yet (after the first round)" : s.start_score.toFixed(4)} on the labels ` +
    "the latest round was compared on. A round serves only if it scores at least as well as the model serving " +
    "when it ends." : "";
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
  const f = (x) => (x == null || Number.isNaN(x) ? "" : x.toFixed(4));
  const how = (v) => (!v.method ? "" : v.method === "cross-validation" ? `${v.n} labels, ${v.method}`
    : `${v.n} ${v.method === "dev" ? "dev rows" : "held-out labels"}`);
  drawTable($("rounds-table"), ["round", "labels", "recipe", "scored on", "macro-F1", "serving then", "starting model",
    "served", "seconds"],
  rounds.map((r) => {
    const v = r.verdict || {};
    const state = r.state === "done" ? (r.served ? `yes (${r.best})` : `no: ${r.reason.replace(/^not served: /, "")}`)
      : `${r.state}: ${r.message}`;
    return [r.name, r.labels, r.recipe || "full", how(v), f(v.score),
      v.incumbent ? `${v.incumbent} ${f(v.incumbent_score)}` : "", f(v.start_score), state, r.seconds];
  }));
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
  const best = done.map((r) => (r.verdict && r.verdict.score != null ? r.verdict.score : r.scores[r.best]));
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
  // Enter and Space never answer: a button clicked earlier may still hold the focus, and its default action would
  // answer the next review with the last label clicked
  if ((e.key === "Enter" || e.key === " ") && $("teach-card").contains(document.activeElement)
      && document.activeElement.tagName === "BUTTON") {
    e.preventDefault();
    return;
  }
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
    b.addEventListener("click", () => { b.blur(); act("answer", label); }); // no button stays armed for Enter
    return b;
  }), el("button", { type: "button", id: "skip-btn", text: "skip (s)" }),
  el("button", { type: "button", id: "undo-btn", text: "undo (u)" }));
  $("skip-btn").addEventListener("click", () => { $("skip-btn").blur(); act("skip"); });
  $("undo-btn").addEventListener("click", () => { $("undo-btn").blur(); act("undo"); });
  $("teach-keyhelp").textContent = Object.entries(teach.keys).map(([k, l]) => `${k} ${l}`).join(" · ");
  $("retrain-btn").addEventListener("click", retrainNow);
  $("label-pool-btn").addEventListener("click", labelPool);
  document.addEventListener("keydown", onKey, true); // capture: before a focused button's own Enter
  await replayPending();
  showState(state);
  await fetchNext();
  await refreshInfo();
  pollTeach();
}

initTeach();
