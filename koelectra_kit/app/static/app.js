// koelectra-kit app: the page's behaviour. Plain JS, no framework; user data only ever goes in via
// textContent (never innerHTML), so a review holding "<script>" is shown, not run.
"use strict";

const $ = (id) => document.getElementById(id);
let info = { labels: [], max_upload_bytes: 0 };
let upload = null; // the current upload (server's answer)
let pollTimer = null;

// the server's answer; one that is not 2xx thrown as its one line ({"error": ...}, else the status)
async function answer(path, options = {}) {
  let response;
  try {
    response = await fetch(path, options);
  } catch (e) {
    throw new Error("the app is not answering (was it stopped?)");
  }
  if (!response.ok) {
    let body = {};
    try { body = await response.json(); } catch (e) { /* not JSON: fall through to the status */ }
    throw new Error(body.error || `the server answered ${response.status}`);
  }
  return response;
}

async function api(path, options = {}) {
  const response = await answer(path, options);
  try { return await response.json(); } catch (e) { return {}; }
}

function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.appendChild(c);
  return node;
}

function showError(id, message) {
  const node = $(id);
  node.textContent = message || "";
  node.hidden = !message;
}

const pct = (p) => (p == null ? "" : `${(100 * p).toFixed(1)}%`);
const size = (b) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(0)} MB` : `${(b / 1024).toFixed(0)} KB`);
const labelClass = (label) => (["negative", "neutral", "positive"].includes(label) ? label : "");

// rows of [name, bar, value] into a .bars grid
function drawBars(container, items) {
  container.replaceChildren();
  for (const { name, fraction, text } of items) {
    const fill = el("div", { class: `fill ${labelClass(name)}` });
    fill.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
    container.append(el("span", { text: name }), el("div", { class: "track" }, [fill]), el("span", { text }));
  }
}

function drawTable(table, header, rows, picked = -1) {
  table.replaceChildren();
  const head = el("tr", {}, header.map((h, i) => el("th", { text: h, class: i === picked ? "picked" : "" })));
  table.append(el("thead", {}, [head]));
  const body = el("tbody");
  for (const row of rows) {
    body.append(el("tr", {}, row.map((v, i) => el("td", {
      text: v == null ? "" : String(v),
      class: (i === picked ? "picked " : "") + (typeof v === "number" ? "num" : ""),
    }))));
  }
  table.append(body);
}

// ---- try one review
async function predict() {
  const text = $("review-text").value;
  showError("predict-error", "");
  $("predict-btn").disabled = true;
  try {
    const r = await api("/api/predict", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text }),
    });
    $("predict-label").textContent = r.label;
    $("predict-label").className = `pill ${labelClass(r.label)}`;
    $("predict-confidence").textContent = `confidence ${pct(r.confidence)}`;
    $("predict-status").textContent = r.status === "truncated" ? "(long text: labelled from its start)" : "";
    drawBars($("predict-bars"), r.labels.map((name, i) => ({ name, fraction: r.probs[i], text: pct(r.probs[i]) })));
    $("predict-result").hidden = false;
  } catch (e) {
    $("predict-result").hidden = true;
    showError("predict-error", e.message);
  } finally {
    $("predict-btn").disabled = false;
  }
}

// ---- label a file
async function sendFile(file) {
  resetFile();
  if (file.size > info.max_upload_bytes) { // the server refuses it too; this saves sending it
    showError("upload-error", `${file.name} is ${size(file.size)}; the limit is ${size(info.max_upload_bytes)}: ` +
      "split the file, or label it with `koelectra-kit label` on the command line (no size limit)");
    return;
  }
  $("drop").querySelector("span").textContent = `uploading ${file.name} …`;
  try {
    upload = await api(`/api/upload?name=${encodeURIComponent(file.name)}`, { method: "POST", body: file });
    showSetup();
  } catch (e) {
    showError("upload-error", e.message);
  } finally {
    $("drop").querySelector("span").textContent = "Choose a file, or drop it here";
    $("file-input").value = "";
  }
}

function showSetup() {
  const u = upload;
  $("file-info").textContent = `${u.name} · ${u.kind.toUpperCase()} · ${u.encoding} · about ${u.rows.toLocaleString()} rows`;
  $("column-note").textContent = u.note;
  $("column-note").hidden = !u.note;
  const select = $("column-select");
  select.replaceChildren(...u.columns.map((c, i) => {
    const first = (u.preview[0] || [])[i] || "";
    return el("option", { value: c, text: first ? `${c}: ${first.slice(0, 40)}` : c });
  }));
  select.value = u.guessed;
  drawPreview();
  $("start-btn").textContent = `Label ${u.rows.toLocaleString()} rows`;
  $("start-btn").disabled = false;
  $("setup").hidden = false;
}

function drawPreview() {
  drawTable($("preview"), upload.columns, upload.preview, upload.columns.indexOf($("column-select").value));
}

async function start(anyway = false) {
  showError("job-error", "");
  $("anyway-btn").hidden = true;
  $("start-btn").disabled = true;
  try {
    const job = await api(`/api/jobs/${upload.id}/start`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      // anyway: the column was refused as empty in most rows, and the analyst says it is the reviews all the same
      body: JSON.stringify({ text_column: $("column-select").value, allow_mostly_empty: anyway }),
    });
    $("setup").hidden = true;
    $("progress-box").hidden = false;
    showProgress(job);
    poll();
  } catch (e) {
    showError("job-error", e.message);
    $("start-btn").disabled = false;
  }
}

function poll() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(async () => {
    try {
      const job = await api(`/api/jobs/${upload.id}`);
      showProgress(job);
      if (job.state === "done") return showResults(job);
      if (job.state === "error") {
        showError("job-error", job.message);
        $("anyway-btn").hidden = job.retry !== "allow_mostly_empty";
        $("setup").hidden = false;
        $("start-btn").disabled = false;
        return;
      }
      poll();
    } catch (e) {
      showError("job-error", e.message);
    }
  }, 300);
}

function showProgress(job) {
  const total = Math.max(job.rows_total, 1);
  const done = job.state === "done" ? total : Math.min(job.rows_done, total);
  $("progress").value = Math.round((100 * done) / total);
  const word = { queued: "waiting for the model", running: "labelling", done: "done", error: "stopped" }[job.state] || job.state;
  $("progress-text").textContent = `${word}: ${job.rows_done.toLocaleString()} / ${job.rows_total.toLocaleString()} rows`;
}

function showResults(job) {
  const s = job.summary;
  $("progress-box").dataset.done = "true";
  const secs = job.seconds < 1 ? `${Math.max(1, Math.round(job.seconds * 1000))} ms` : `${job.seconds.toFixed(1)} s`;
  $("summary-text").textContent = `${s.rows.toLocaleString()} rows labelled in ${secs} ` +
    `(${Math.round(job.rows_per_s || 0).toLocaleString()} rows/s); text column “${job.text_column}”.` +
    (info.corrections ? ` ${s.human.toLocaleString()} row${s.human === 1 ? "" : "s"} carry your own label from ` +
      `${info.labels_file} (label_source = human); the download always holds your latest answers and fixes.` : "");
  const labelled = Object.values(s.per_label).reduce((a, b) => a + b, 0) || 1;
  drawBars($("dist"), info.labels.map((name) => {
    const n = s.per_label[name] || 0;
    return { name, fraction: n / labelled, text: `${n.toLocaleString()} (${pct(n / labelled)})` };
  }));
  const flagged = Object.entries(s.status).filter(([k]) => k !== "ok");
  $("flag-text").textContent = flagged.length
    ? `Flagged (kept, see the status column): ${flagged.map(([k, v]) => `${k} ${v.toLocaleString()}`).join(", ")}`
    : "No row flagged: every row was read and labelled.";
  $("malformed").replaceChildren(...s.malformed.slice(0, 5).map((m) => el("li", { text: m })));
  // a download refused before it is asked for (a file longer than an Excel sheet) is its one line, not a link
  $("downloads").replaceChildren(el("span", { text: "Download:" }), ...job.downloads.flatMap((d, i) => d.refused
    ? [el("span", { id: `download-${d.kind}`, class: "note", text: `${d.label}: ${d.refused}` })]
    : downloadLink(job, d, i === 0)));
  const ids = [...job.review, ...job.flagged].some((r) => r.id != null); // the file's own id column, when it has one
  const row = (r) => [r.row, ...(ids ? [r.id] : []), r.text, r.label, r.confidence,
    ...r.probs.map((p) => (p == null ? "" : p)), r.status];
  const header = ["row", ...(ids ? ["id"] : []), job.text_column, "label", "confidence",
    ...info.labels.map((l) => `prob_${l}`), "status"];
  drawTable($("review-table"), header, job.review.map(row), ids ? 2 : 1);
  if (info.corrections) addFixes(job);
  drawTable($("flagged-table"), header, job.flagged.map(row), ids ? 2 : 1);
  $("flagged-title").hidden = $("flagged-table").parentElement.hidden = !job.flagged.length;
  $("results").hidden = false;
}

// A download is a link (Save link as, a middle or modified click, as links work) that a plain click fetches: some
// files are refused only while the server makes them (a character cp949 can't store, a control character a
// worksheet can't, an upload no longer here), and a plain <a download> would show that as a failed download with
// the server's one line lost. Fetched, the line shows beside the button, and a good answer is saved as the link is.
function downloadLink(job, d, primary) {
  const link = el("a", {
    id: `download-${d.kind}`, class: primary ? "button primary" : "button",
    href: `/api/jobs/${job.id}/download/${d.kind}`, download: d.filename, text: `${d.filename} · ${d.label}`,
  });
  const error = el("span", { id: `download-error-${d.kind}`, class: "error", hidden: "" });
  link.addEventListener("click", async (e) => {
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return; // the browser's own: new tab, save
    e.preventDefault();
    if (link.getAttribute("aria-busy")) return; // one fetch at a time: a second click is not a second file
    showError(error.id, "");
    link.setAttribute("aria-busy", "true");
    try {
      const response = await answer(link.href);
      const name = attachmentName(response.headers.get("Content-Disposition")) || link.download;
      saveBlob(await response.blob(), name);
    } catch (err) {
      showError(error.id, err.message);
    } finally {
      link.removeAttribute("aria-busy");
    }
  });
  return [link, error];
}

// the file name in Content-Disposition: filename*=utf-8''%EA%B3%A0... (a Korean name, RFC 5987), else filename="..."
function attachmentName(header) {
  const encoded = /filename\*=utf-8''([^;\s]+)/i.exec(header || "");
  if (encoded) {
    try { return decodeURIComponent(encoded[1]); } catch (e) { /* not percent-encoding: try the plain name */ }
  }
  const plain = /filename="([^"]*)"/i.exec(header || "");
  return plain ? plain[1] : "";
}

function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: filename });
  document.body.append(a); // Firefox clicks only a link in the document
  a.click();
  a.remove();
  // the browser reads the blob after click() returns: released once it has had time to, as FileSaver.js does
  setTimeout(() => URL.revokeObjectURL(url), 40_000);
}

// corrections (--labels): a label picker per reviewed row; a fix is appended to the labels file, ready for a retrain
function addFixes(job) {
  const table = $("review-table");
  table.querySelector("thead tr").append(el("th", { text: `fix → ${info.labels_file}` }));
  table.querySelectorAll("tbody tr").forEach((tr, i) => {
    const r = job.review[i];
    const select = el("select", {}, info.labels.map((l) => el("option", { value: l, text: l })));
    select.value = r.label;
    const save = el("button", { type: "button", class: "fix-btn", text: "save" });
    const cell = el("td", { class: "fix" }, [select, save]);
    const answerId = `${job.id}-${r.row}-${Date.now().toString(36)}`;
    let n = 0;
    save.addEventListener("click", async () => {
      save.disabled = true;
      try {
        const a = await api("/api/corrections", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ job: job.id, row: r.row, label: select.value, answer_id: `${answerId}-${n}` }) });
        n += 1; // a later fix of the same row is a new answer (the latest one counts)
        save.textContent = `saved: ${a.label}`;
        save.title = `in ${a.labels_file} and in the next download`;
      } catch (e) {
        save.textContent = e.message;
      } finally {
        save.disabled = false;
      }
    });
    tr.append(cell);
  });
}

function resetFile() {
  clearTimeout(pollTimer);
  for (const id of ["setup", "progress-box", "results", "anyway-btn"]) $(id).hidden = true;
  delete $("progress-box").dataset.done;
  showError("upload-error", "");
  showError("job-error", "");
}

async function again() {
  if (upload) api(`/api/jobs/${upload.id}`, { method: "DELETE" }).catch(() => {});
  upload = null;
  resetFile();
}

async function init() {
  try {
    info = await api("/api/info");
  } catch (e) {
    showError("upload-error", e.message);
    return;
  }
  $("model-name").textContent = info.model;
  for (const id of ["try", "file"]) $(id).hidden = !info.classifier; // teach mode from an encoder: none yet
  $("model-labels").textContent = info.labels.join(" · ");
  $("max-size").textContent = size(info.max_upload_bytes);
  $("examples").replaceChildren(...info.examples.map((text) => {
    const b = el("button", { class: "example", text, type: "button" });
    b.addEventListener("click", () => { $("review-text").value = text; predict(); });
    return b;
  }));
  $("predict-btn").addEventListener("click", predict);
  $("review-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) predict();
  });
  $("file-input").addEventListener("change", (e) => e.target.files[0] && sendFile(e.target.files[0]));
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files[0]) sendFile(e.dataTransfer.files[0]);
  });
  $("column-select").addEventListener("change", () => { drawPreview(); $("anyway-btn").hidden = true; });
  $("start-btn").addEventListener("click", () => start(false));  // (not the click event as `anyway`)
  $("anyway-btn").addEventListener("click", () => start(true));
  $("again-btn").addEventListener("click", again);
}

init();
