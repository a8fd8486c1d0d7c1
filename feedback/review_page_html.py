"""The review page (`flywheel review serve`): one self-contained HTML page, no external assets.

Attempt text is hostile (a model wrote it; code printed it): every piece of it reaches the page
through `textContent` on elements built with `createElement`, never as markup. The server sends a
Content-Security-Policy that allows only this page's own script and style (by their hashes), so
even a slip here would not run a response's `<script>`. The token arrives once in the URL
(`?token=`), is kept in sessionStorage, dropped from the address bar, and sent as a bearer header.
The token is the reviewer's own: the page shows whose it is (the server's answer) and never asks
for a name, so a label cannot be given under another's.
"""

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f4f4f6; color: #1d1d22; }
header { position: sticky; top: 0; background: #20232a; color: #fff; padding: 8px 16px;
         display: flex; gap: 16px; align-items: center; flex-wrap: wrap; z-index: 1; }
header h1 { font-size: 16px; margin: 0; }
#counts { font-variant-numeric: tabular-nums; }
#status { color: #ffb3b3; }
main { padding: 12px 16px; max-width: 1100px; }
article { background: #fff; border: 1px solid #d5d5dc; border-left: 4px solid #e0a000;
          border-radius: 4px; margin: 0 0 12px; padding: 8px 12px; }
article.labeled { border-left-color: #2e8b57; opacity: 0.8; }
.meta { display: flex; gap: 12px; flex-wrap: wrap; color: #555; }
.meta b { color: #1d1d22; }
.reason-audit { color: #7a3ea0; font-weight: bold; }
.reason-unverified { color: #a05a00; font-weight: bold; }
h3 { font-size: 12px; text-transform: uppercase; color: #777; margin: 8px 0 2px; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f9; border: 1px solid #e5e5ea;
      padding: 6px; margin: 0; max-height: 320px; overflow: auto; }
.controls { display: flex; gap: 8px; flex-wrap: wrap; align-items: center; margin-top: 8px; }
.controls input[type=number] { width: 5em; }
.controls textarea { width: 100%; min-height: 2.5em; }
button { font: inherit; padding: 3px 12px; cursor: pointer; }
button.pass { background: #dff3e4; } button.fail { background: #f8dede; }
.state { margin-top: 6px; font-weight: bold; color: #2e8b57; }
.verifier { margin-top: 2px; color: #7a3ea0; }
"""

SCRIPT = r"""
"use strict";
const TOKEN_KEY = "flywheel-review-token";
const params = new URLSearchParams(location.search);
const token = params.get("token") || sessionStorage.getItem(TOKEN_KEY) || "";
sessionStorage.setItem(TOKEN_KEY, token);
history.replaceState(null, "", location.pathname);  // the token leaves the address bar
let counts = {pending: 0, labeled: 0, total: 0};
const cards = new Map();  // attempt_id -> {node, row} of the queue now shown
let loading = Promise.resolve();

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) node.append(child);  // strings become text nodes, never markup
  return node;
}

function say(text) { document.getElementById("status").textContent = text; }

async function api(path, body) {
  const init = {headers: {"Authorization": "Bearer " + token}};
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
  return data;
}

function showCounts() {
  document.getElementById("counts").textContent =
    `pending ${counts.pending} / labeled by you ${counts.labeled} / total ${counts.total}`;
}

function showLabel(card, row) {
  card.classList.add("labeled");
  const l = row.label;
  card.querySelector(".state").textContent =
    `labeled: score ${l.score} (${l.score >= 0.5 ? "pass" : "fail"})` + (l.label ? ` · ${l.label}` : "");
  if (row.reason === "audit") {
    const reward = row.verifier_reward === null ? "none" : row.verifier_reward;
    card.querySelector(".verifier").textContent = `verifier: reward ${reward}, verdict ${row.verdict}`;
  }
}

function card(row) {
  const score = el("input", {type: "number", min: 0, max: 1, step: 0.05, className: "score",
                             title: "score 0..1"});
  const label = el("input", {type: "text", className: "label", placeholder: "label", maxLength: 200});
  const comment = el("textarea", {className: "comment", placeholder: "comment", maxLength: 10000});
  const node = el("article", {className: "attempt", tabIndex: -1},
    el("div", {className: "meta"},
       el("span", {}, "iteration ", el("b", {}, String(row.iteration))),
       el("span", {}, "domain ", el("b", {}, row.domain)),
       el("span", {}, "task ", el("b", {}, row.task_id)),
       el("span", {className: "reason-" + row.reason}, row.reason),
       el("span", {}, row.attempt_id)),
    el("h3", {}, "Prompt"), el("pre", {className: "prompt"}, row.prompt || ""),
    el("h3", {}, "Response"), el("pre", {className: "response"}, row.response || ""),
    el("h3", {}, "Output"), el("pre", {className: "observation"}, row.observation || ""),
    el("div", {className: "controls"},
       el("button", {className: "pass", type: "button", onclick: () => submit(row.attempt_id, 1)}, "Pass"),
       el("button", {className: "fail", type: "button", onclick: () => submit(row.attempt_id, 0)}, "Fail"),
       score, label,
       el("button", {className: "submit", type: "button",
                     onclick: () => submit(row.attempt_id, score.value === "" ? NaN : Number(score.value))},
          "Submit"),
       comment),
    el("div", {className: "state"}), el("div", {className: "verifier"}));
  node.dataset.attemptId = row.attempt_id;
  if (row.label) showLabel(node, row);
  cards.set(row.attempt_id, {node, row});
  return node;
}

async function submit(attemptId, score) {
  await loading;  // the queue is shown first: the label lands on the card now shown
  const {node, row} = cards.get(attemptId) || {};
  if (!node) return;
  if (!(score >= 0 && score <= 1)) { say("a score is a number from 0 to 1"); return; }
  try {
    const stored = await api("/api/review", {attempt_id: row.attempt_id, score,
      label: node.querySelector(".label").value, comment: node.querySelector(".comment").value});
    if (!row.label) { counts.pending -= 1; counts.labeled += 1; }
    Object.assign(row, stored);
    showLabel(node, row);
    showCounts();
    say("");
    const next = [...document.querySelectorAll("article.attempt:not(.labeled)")]
      .find(c => node.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING)
      || document.querySelector("article.attempt:not(.labeled)");
    if (next) { next.scrollIntoView({block: "start"}); next.querySelector("button.pass").focus(); }
  } catch (e) { say("not saved: " + e.message); }
}

async function load() {
  try {
    const data = await api("/api/queue");
    counts = data.counts;
    showCounts();
    document.getElementById("run").textContent = data.run_id || "";
    document.getElementById("reviewer").textContent = data.reviewer;
    cards.clear();
    document.getElementById("queue").replaceChildren(...data.rows.map(card));
    document.body.dataset.loaded = "true";
    say("");
  } catch (e) { say("could not load the queue: " + e.message); }
}

loading = load();
"""

BODY = """<header><h1>Flywheel review <span id="run"></span></h1>
<span>reviewer <b id="reviewer"></b></span>
<span id="counts"></span><span id="status" role="status"></span></header>
<main id="queue"></main>"""


def page() -> str:
    """The whole page; its script and style are exactly SCRIPT and STYLE (the CSP hashes them)."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"referrer\" content=\"no-referrer\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>Flywheel review</title><style>{STYLE}</style></head>\n<body>{BODY}"
            f"<script>{SCRIPT}</script></body></html>\n")
