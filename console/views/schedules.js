// Schedules: expression, health, next fire times, last run; pause and resume. A schedule's
// own page (its runs, "Run now", the baseline) is views/schedule.js.

import { api } from "../lib/api.js";
import { h, notice, table } from "../lib/dom.js";
import { when } from "../lib/format.js";

function lastRun(run) {
  if (!run) return "not yet";
  const at = when(run.scheduled_time);
  if (run.job_id) return h("span", {}, `${at}: `, h("a", { href: `#/jobs/${run.job_id}`, class: "mono" }, run.job_id));
  return `${at}: skipped (${run.skipped || "no job"})`;
}

export function schedulesView(main) {
  const part = h("div", {}, notice("info", "Loading…"));
  const messages = h("div", { class: "messages" });
  main.append(h("h1", {}, "Schedules"), messages, part);

  async function toggle(schedule) {
    try {
      await api(`/schedules/${schedule.schedule_id}`, { method: "PATCH", body: { enabled: !schedule.enabled } });
      messages.replaceChildren(notice("info", `${schedule.name} ${schedule.enabled ? "paused" : "resumed"}.`));
      load();
    } catch (error) {
      messages.replaceChildren(notice("error", error.message));
    }
  }

  async function load() {
    let list;
    try {
      list = await api("/schedules");
    } catch (error) {
      part.replaceChildren(notice("error", `Schedules could not be listed: ${error.message}`));
      return;
    }
    if (!list.schedules.length) {
      part.replaceChildren(h("p", {}, "No schedules yet. Make one with ", h("code", {}, "pagefleet schedules create"), "."));
      return;
    }
    part.replaceChildren(table(["Name", "When", "State", "Health", "Next fires", "Last run", "Jobs", ""], list.schedules.map((s) =>
      h("tr", { dataset: { scheduleId: s.schedule_id } },
        h("td", {}, h("a", { href: `#/schedules/${s.schedule_id}` }, s.name)),
        h("td", {}, h("code", {}, s.expression), ` (${s.timezone})`),
        h("td", {}, s.enabled ? "active" : "paused"),
        h("td", {}, h("span", { class: `badge health-${s.health}` }, s.health),
          s.consecutive_failures ? ` ${s.consecutive_failures} failed` : ""),
        h("td", {}, s.enabled && s.next_fire_times.length
          ? h("ul", { class: "plain" }, s.next_fire_times.slice(0, 3).map((t) => h("li", {}, when(t))))
          : "—"),
        h("td", {}, lastRun(s.last_run)),
        h("td", {}, h("a", { href: `#/jobs?schedule_id=${encodeURIComponent(s.schedule_id)}` }, "Jobs", h("span", { class: "visually-hidden" }, ` of ${s.name}`))),
        h("td", {}, h("button", { type: "button", class: "secondary", onclick: () => toggle(s) },
          s.enabled ? "Pause" : "Resume", h("span", { class: "visually-hidden" }, ` ${s.name}`)))))));
  }
  load();
}
