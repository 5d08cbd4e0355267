// ledger serve: live updates by polling /api/. Writes text with textContent
// only (never innerHTML); reads its targets from data- attributes.
"use strict";

const EVERY_MS = 1000; // a running task's output and status
const COUNTS_EVERY_MS = 5000; // the counts of / and /tasks

async function getJSON(url) {
  const res = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  if (!res.ok) {
    throw new Error(url + ": " + res.status);
  }
  return res.json();
}

// The summary counts of / and /tasks: <span data-count="failed">.
async function refreshCounts() {
  const stats = await getJSON("/api/stats");
  for (const el of document.querySelectorAll("[data-count]")) {
    const n = stats.counts[el.dataset.count];
    el.textContent = String(n === undefined ? 0 : n);
  }
  for (const el of document.querySelectorAll("[data-stat]")) {
    const v = stats[el.dataset.stat];
    el.textContent = v === null || v === undefined ? "-" : String(v);
  }
}

// Output as the page (and the terminal) shows it: each control or format
// character but a newline and a tab (ESC, CR, a bidirectional override) as its
// escape, \x1b or \u202e (pages.esc, cli/escapes.py).
function shown(text) {
  return text.replace(/(?![\n\t])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (ch) => {
    const code = ch.codePointAt(0);
    if (code === 0x0d) {
      return "\\r";
    }
    if (code < 0x100) {
      return "\\x" + code.toString(16).padStart(2, "0");
    }
    return code < 0x10000
      ? "\\u" + code.toString(16).padStart(4, "0")
      : "\\U" + code.toString(16).padStart(8, "0");
  });
}

// A task page: <pre id="output" data-query=… data-attempt=… data-seen=…> gets the
// new output appended while the attempt runs; the status follows the record.
async function followTask(pre) {
  // The key goes in the query (a path segment "." or ".." would be dropped),
  // encoded by the server: `key=bad%9F%FF` keeps bytes that are not UTF-8.
  const key = pre.dataset.query;
  let seen = Number(pre.dataset.seen || "0");
  let attempt = pre.dataset.attempt || "";
  for (;;) {
    let ended = false;
    try {
      const rec = await getJSON("/api/task?" + key);
      const status = document.getElementById("status");
      if (status && status.textContent !== rec.Status) {
        status.textContent = rec.Status;
        status.className = "status-" + rec.Status;
      }
      const q = new URLSearchParams({ since: String(seen) });
      if (attempt) {
        q.set("attempt", attempt);
      }
      const res = await fetch("/api/task/output?" + key + "&" + q, {
        credentials: "same-origin",
        cache: "no-store",
      });
      if (res.ok) {
        const out = await res.json();
        if (!attempt || Number(attempt) !== out.attempt.n) {
          attempt = String(out.attempt.n);
        }
        if (out.output) {
          pre.textContent += shown(out.output);
        }
        seen = out.seen;
        // Abandoned: no end recorded, and the lease it ran under is over.
        const abandoned = out.attempt.abandoned === true;
        ended = abandoned || (out.attempt.ended !== null && out.attempt.ended !== undefined);
        const state = document.getElementById("attempt-state");
        if (state) {
          state.textContent = abandoned ? "abandoned" : ended ? "ended" : "running";
        }
        ended = abandoned || (ended && rec.Status !== "claimed");
      }
    } catch (err) {
      // The server may be restarting: try again at the next tick.
    }
    if (ended) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
  }
}

function start() {
  if (document.querySelector("[data-count], [data-stat]")) {
    // The counts read every record on some stores: every few seconds, and
    // not while the tab is hidden.
    const tick = () => {
      const next = () => setTimeout(tick, COUNTS_EVERY_MS);
      if (document.hidden) {
        next();
        return;
      }
      refreshCounts().catch(() => {}).finally(next);
    };
    // A page sent without its counts ("…") asks for them at once.
    const pending = document.querySelector("[data-count]");
    setTimeout(tick, pending && pending.textContent === "…" ? 0 : COUNTS_EVERY_MS);
  }
  const pre = document.getElementById("output");
  if (pre && pre.dataset.live === "1") {
    followTask(pre);
  }
}

document.addEventListener("DOMContentLoaded", start);
