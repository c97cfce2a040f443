// One schedule: its health and last change, "Run now", and its runs with a change badge each
// (a succeeded run can be pinned as the baseline the monitor compares with).

import { api } from "../lib/api.js";
import { h, notice, table } from "../lib/dom.js";
import { changeBadge } from "../lib/changes.js";
import { when } from "../lib/format.js";
import { badge } from "../lib/jobs.js";

function summary(s) {
  const change = s.last_change
    ? h("span", {}, when(s.last_change.at), ": ", h("a", { href: `#/jobs/${s.last_change.job_id}`, class: "mono" }, s.last_change.job_id))
    : "none yet";
  const items = [
    ["Expression", h("code", {}, s.expression), ` (${s.timezone})`],
    ["State", s.enabled ? "active" : "paused"],
    ["Health", h("span", { class: `badge health-${s.health}`, id: "schedule-health" }, s.health)],
    ["Failed runs in a row", String(s.consecutive_failures)],
    ["Alert", s.alert ? `after ${s.alert.after_failures} failed run(s) in a row` : "none"],
    ["Last change", change],
    ["Baseline", s.baseline_job_id
      ? h("span", {}, "pinned: ", h("a", { href: `#/jobs/${s.baseline_job_id}`, class: "mono" }, s.baseline_job_id))
      : "the last successful run"],
  ];
  return h("dl", { class: "summary" }, items.map(([k, ...v]) => [h("dt", {}, k), h("dd", {}, ...v)]));
}

export function scheduleView(main, { match, navigate }) {
  const scheduleId = match[1];
  const head = h("div");
  const messages = h("div", { class: "messages" });
  const runs = h("div", {}, notice("info", "Loading…"));
  main.append(head, messages, h("section", { "aria-labelledby": "runs-title" }, h("h2", { id: "runs-title" }, "Runs"), runs));

  async function act(path, options, done) {
    try {
      const answer = await api(path, options);
      done(answer);
    } catch (error) {
      messages.replaceChildren(notice("error", error.message));
    }
  }

  function runsTable(schedule, list) {
    if (!list.jobs.length && !list.skipped.length) return h("p", {}, "No runs yet.");
    const rows = list.jobs.map((job) => h("tr", { dataset: { jobId: job.job_id } },
      h("td", {}, when(job.scheduled_time)),
      h("td", {}, h("a", { href: `#/jobs/${job.job_id}`, class: "mono" }, job.job_id)),
      h("td", {}, badge(job.status)),
      h("td", {}, changeBadge(job.changes) || "—"),
      h("td", {}, job.status === "succeeded" && job.job_id !== schedule.baseline_job_id
        ? h("button", { type: "button", class: "secondary", onclick: () => act(`/schedules/${scheduleId}/baseline`,
          { method: "PUT", body: { job_id: job.job_id } }, () => {
            messages.replaceChildren(notice("info", `Runs are now compared with ${job.job_id}.`));
            load();
          }) }, "Pin as baseline", h("span", { class: "visually-hidden" }, ` ${job.job_id}`))
        : job.job_id === schedule.baseline_job_id ? "baseline" : "")));
    for (const skipped of list.skipped) {
      rows.push(h("tr", {}, h("td", {}, when(skipped.scheduled_time)), h("td", {}, "—"),
        h("td", {}, `skipped (${skipped.skipped || "no job"})`), h("td", {}, "—"), h("td", {}, "")));
    }
    return table(["Scheduled for", "Job", "Status", "Changes", ""], rows, { caption: "Newest first" });
  }

  async function load() {
    let schedule;
    let list;
    try {
      [schedule, list] = await Promise.all([api(`/schedules/${scheduleId}`), api(`/schedules/${scheduleId}/runs`)]);
    } catch (error) {
      if (error.status === 404) {
        main.replaceChildren(h("h1", {}, "Schedule not found"), h("p", {}, h("a", { href: "#/schedules" }, "Back to the schedules")));
      } else {
        runs.replaceChildren(notice("error", `The schedule could not be read: ${error.message}`));
      }
      return;
    }
    const runNow = h("button", { type: "button", onclick: () => act(`/schedules/${scheduleId}/run`, { method: "POST" },
      (started) => navigate(`#/jobs/${started.job_id}`)) }, "Run now");
    head.replaceChildren(h("h1", {}, "Schedule ", schedule.name), summary(schedule), h("div", { class: "actions" }, runNow));
    runs.replaceChildren(runsTable(schedule, list));
  }
  load();
}
