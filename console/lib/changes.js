// A monitor's run against its baseline: the change badge of a run, and the record diff as a
// table (added / removed / changed with before -> after), with the visual diff image.

import { h, table } from "./dom.js";

function text(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// "+1 −0 ~1", "no change", "no baseline" or nothing (not a monitor's run).
export function changeBadge(changes) {
  if (!changes) return null;
  if (!changes.baseline_job_id) return h("span", { class: "badge change-none", dataset: { change: "none" } }, "no baseline");
  if (!changes.changed) return h("span", { class: "badge change-same", dataset: { change: "same" } }, "no change");
  const s = changes.summary || {};
  const parts = [`+${s.added || 0}`, `-${s.removed || 0}`, `~${s.changed || 0}`];
  if (changes.visual && changes.visual.changed) parts.push(`${(changes.visual.ratio * 100).toFixed(1)} % pixels`);
  return h("span", { class: "badge change-changed", dataset: { change: "changed" } }, `changed ${parts.join(" ")}`);
}

function rowsOf(name, tracked) {
  if (tracked.kind === "value") {
    return [h("tr", { dataset: { change: "changed" } }, h("td", {}, name), h("td", {}, "changed"), h("td", {}, "—"),
      h("td", {}, "—"), h("td", {}, text(tracked.before)), h("td", {}, text(tracked.after)))];
  }
  const rows = [];
  for (const record of tracked.added || []) {
    rows.push(h("tr", { dataset: { change: "added" } }, h("td", {}, name), h("td", {}, "added"), h("td", {}, "—"),
      h("td", {}, "—"), h("td", {}, "—"), h("td", { class: "mono" }, text(record))));
  }
  for (const record of tracked.removed || []) {
    rows.push(h("tr", { dataset: { change: "removed" } }, h("td", {}, name), h("td", {}, "removed"), h("td", {}, "—"),
      h("td", {}, "—"), h("td", { class: "mono" }, text(record)), h("td", {}, "—")));
  }
  for (const record of tracked.changed || []) {
    for (const [field, change] of Object.entries(record.fields || {})) {
      rows.push(h("tr", { dataset: { change: "changed" } }, h("td", {}, name), h("td", {}, "changed"),
        h("td", { class: "mono" }, text(record.key)), h("td", {}, field || "—"),
        h("td", { class: "before" }, text(change.before)), h("td", { class: "after" }, text(change.after))));
    }
  }
  return rows;
}

// The "Changes" part of a run's page; `links` are its artifacts (diff.png among them).
export function changesPart(changes, links) {
  if (!changes.baseline_job_id) return [h("p", { id: "changes-note" }, changes.note || "No baseline to compare with.")];
  const s = changes.summary || {};
  const head = h("p", { id: "changes-summary" },
    changeBadge(changes), " against ", h("a", { href: `#/jobs/${changes.baseline_job_id}`, class: "mono" }, changes.baseline_job_id),
    `: ${s.added || 0} added, ${s.removed || 0} removed, ${s.changed || 0} changed.`);
  const rows = Object.entries(changes.records || {}).flatMap(([name, tracked]) => rowsOf(name, tracked));
  const truncated = Object.values(changes.records || {}).some((t) => t.truncated);
  const parts = [head];
  if (rows.length) {
    parts.push(table(["Tracked", "Change", "Key", "Field", "Before", "After"], rows,
      { caption: "What changed, record by record", className: "changes" }));
  }
  if (truncated) parts.push(h("p", {}, "Only the first records are listed here; ", h("code", {}, "changes.json"), " has them all."));
  const visual = changes.visual;
  if (visual) {
    parts.push(h("p", { id: "visual-ratio" },
      `Screenshot: ${(visual.ratio * 100).toFixed(2)} % of pixels changed (threshold ${(visual.threshold * 100).toFixed(2)} %).`,
      visual.note ? ` ${visual.note}` : ""));
    const diff = links.find((a) => a.name === visual.diff_artifact);
    if (diff) {
      parts.push(h("figure", { class: "visual-diff" },
        h("a", { href: diff.url, target: "_blank", rel: "noopener", dataset: { link: "diff" } },
          h("img", { src: diff.url, alt: "Visual difference with the baseline: changed pixels in red", id: "visual-diff" })),
        h("figcaption", {}, "Changed pixels in red, over this run's screenshot")));
    }
  }
  return parts;
}
