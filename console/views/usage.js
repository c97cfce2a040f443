// Usage and its cost per day and per workflow, priced in both regions the API prices.

import { api } from "../lib/api.js";
import { field, h, notice, svg, table } from "../lib/dom.js";
import { isoDay, usd } from "../lib/format.js";

const REGIONS = ["us-east-1", "ap-south-1"];
const DAYS = 14;

function cost(line, region) {
  const priced = line.cost && line.cost[region];
  return priced ? priced.total_usd : 0;
}

// Every day from `first` to `last`, with the report's line for it or nothing used.
function everyDay(days, first, last) {
  const byDay = new Map(days.map((d) => [d.day, d]));
  const all = [];
  for (let t = Date.parse(first); t <= Date.parse(last) && all.length < 400; t += 86400_000) {
    const day = isoDay(new Date(t));
    all.push(byDay.get(day) || { day, cost: {} });
  }
  return all;
}

// Bars of each day's us-east-1 cost; the table below holds the same figures as text.
function chart(days) {
  const width = 600;
  const height = 160;
  const top = Math.max(...days.map((d) => cost(d, REGIONS[0])), 0);
  const step = width / Math.max(days.length, 1);
  const bars = days.map((d, i) => {
    const value = cost(d, REGIONS[0]);
    const tall = top ? Math.max((value / top) * (height - 20), value ? 2 : 0) : 0;
    return svg("rect", { x: i * step + 2, y: height - tall, width: Math.max(step - 4, 1), height: tall, class: "bar" },
      svg("title", {}, `${d.day}: ${usd(value)}`));
  });
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": `Cost per day in ${REGIONS[0]}, highest ${usd(top)}` }, bars);
}

function lineRow(label, line) {
  return h("tr", {},
    h("th", { scope: "row" }, label),
    h("td", { class: "num" }, String(line.jobs)),
    h("td", { class: "num" }, line.browser_seconds.toFixed(1)),
    h("td", { class: "num" }, String(line.page_requests)),
    h("td", { class: "num" }, String(line.artifact_bytes)),
    REGIONS.map((r) => h("td", { class: "num", dataset: { value: cost(line, r) } }, usd(cost(line, r)))));
}

const HEADERS = ["", "Jobs", "Browser-seconds", "Requests", "Artifact bytes", ...REGIONS.map((r) => `Cost ${r}`)];

export function usageView(main) {
  const today = new Date();
  const first = new Date(today.getTime() - (DAYS - 1) * 86400_000);
  const from = h("input", { id: "usage-from", type: "date", value: isoDay(first) });
  const to = h("input", { id: "usage-to", type: "date", value: isoDay(today) });
  const part = h("div");
  main.append(h("h1", {}, "Usage and cost"),
    h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); load(); } },
      field("From", from), field("To", to), h("button", { type: "submit" }, "Show")),
    part);

  async function load() {
    part.replaceChildren(notice("info", "Loading…"));
    let report;
    try {
      report = await api("/usage", { query: { from: from.value, to: to.value } });
    } catch (error) {
      part.replaceChildren(notice("error", `Usage could not be read: ${error.message}`));
      return;
    }
    part.replaceChildren(
      h("dl", { class: "cards" },
        h("div", {}, h("dt", {}, "Jobs"), h("dd", { id: "usage-jobs" }, String(report.total.jobs))),
        h("div", {}, h("dt", {}, "Browser-seconds"), h("dd", {}, report.total.browser_seconds.toFixed(1))),
        REGIONS.map((r) => h("div", {}, h("dt", {}, `Cost, ${r}`), h("dd", { dataset: { value: cost(report.total, r) } }, usd(cost(report.total, r)))))),
      h("section", { "aria-labelledby": "days-title" }, h("h2", { id: "days-title" }, "Per day"),
        chart(everyDay(report.days, report.first_day, report.last_day)),
        table(HEADERS, report.days.map((d) => lineRow(d.day, d)))),
      h("section", { "aria-labelledby": "wf-title" }, h("h2", { id: "wf-title" }, "Per workflow"),
        report.workflows.length ? table(HEADERS, report.workflows.map((w) => lineRow(w.workflow, w))) : h("p", {}, "No usage in these days.")),
      h("p", { class: "hint" }, `Prices as of ${report.prices.as_of} (${report.prices.source}); estimates, in ${report.prices.currency}.`));
  }
  load();
}
