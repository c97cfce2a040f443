// Fleet figures for the tenant (GET /v1/stats, as `pagefleet stats` prints them), refreshed
// while the page is open.

import { api } from "../lib/api.js";
import { field, h, notice, table } from "../lib/dom.js";
import { percent, seconds } from "../lib/format.js";

const REFRESH_MS = 5000;
const WINDOWS = [[3600, "last hour"], [86400, "last 24 hours"], [7 * 86400, "last 7 days"]];

function figure(id, label, value, text) {
  return h("div", {}, h("dt", {}, label), h("dd", { id, dataset: { value: value ?? "" } }, text));
}

export function fleetView(main) {
  const windowSelect = h("select", { id: "fleet-window" },
    WINDOWS.map(([s, label]) => h("option", { value: String(s) }, label)));
  const part = h("div", { "aria-live": "polite" }, notice("info", "Loading…"));
  main.append(h("h1", {}, "Fleet"), h("form", { class: "row" }, field("Window", windowSelect)), part);

  async function load() {
    let stats;
    try {
      stats = await api("/stats", { query: { window_s: windowSelect.value } });
    } catch (error) {
      part.replaceChildren(notice("error", `Fleet figures could not be read: ${error.message}`));
      return;
    }
    const counts = stats.counts || {};
    const waiting = ["queued", "scheduled", "waiting", "retry_scheduled"];
    part.replaceChildren(
      h("dl", { class: "cards" },
        figure("fleet-queued", "Queued", counts.queued ?? 0, String(counts.queued ?? 0)),
        figure("fleet-oldest", "Oldest queued", stats.oldest_queued_age_s, seconds(stats.oldest_queued_age_s)),
        figure("fleet-running", "Running", counts.running ?? 0, String(counts.running ?? 0)),
        figure("fleet-review", "Needs review", counts.needs_review ?? 0, String(counts.needs_review ?? 0)),
        figure("fleet-success", "Success rate", stats.success_rate, percent(stats.success_rate)),
        figure("fleet-failure", "Failure rate", stats.failure_rate, percent(stats.failure_rate)),
        figure("fleet-retry", "Retry rate", stats.retry_rate, percent(stats.retry_rate))),
      table(["", "p50", "p95", "p99"], [
        ["Duration", "duration", stats.duration_s],
        ["Queue delay", "delay", stats.queue_delay_s],
      ].map(([label, id, p]) => h("tr", {}, h("th", { scope: "row" }, label),
        ["p50", "p95", "p99"].map((q) => h("td", { id: `fleet-${id}-${q}`, class: "num", dataset: { value: p[q] ?? "" } }, seconds(p[q])))))),
      table(["State", "Jobs now"], waiting.concat(["running", "needs_review"]).map((s) =>
        h("tr", {}, h("th", { scope: "row" }, s), h("td", { class: "num" }, String(counts[s] ?? 0))))),
      h("p", { class: "hint" }, `${stats.sampled} jobs made in the window; ended: `,
        Object.entries(stats.finished || {}).map(([s, n]) => `${s} ${n}`).join(", ") || "none", "."));
  }

  windowSelect.addEventListener("change", load);
  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => clearInterval(timer);
}
