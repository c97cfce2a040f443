// Jobs, newest first: filters, cursor paging, and statuses that change as the jobs run.

import { api } from "../lib/api.js";
import { clear, field, h, notice } from "../lib/dom.js";
import { between, seconds, when } from "../lib/format.js";
import { badge, ended, jobLabel, STATUSES } from "../lib/jobs.js";
import { live } from "../lib/live.js";

const PAGE = 20;
const MAX_READS = 10;
const RELOAD_EVERY_MS = 1000;
const FILTERS = ["status", "name", "workflow", "schedule_id"];

function row(job) {
  const took = ended(job.status) ? between(job.started_at, job.finished_at) : null;
  return h(
    "tr",
    { dataset: { jobId: job.job_id } },
    h("td", {}, h("a", { href: `#/jobs/${job.job_id}`, class: "mono" }, job.job_id)),
    h("td", {}, jobLabel(job)),
    h("td", { class: "status-cell" }, badge(job.status)),
    h("td", {}, when(job.created_at)),
    h("td", {}, took === null ? "—" : seconds(took)),
    h("td", { class: "num" }, String(job.attempt)),
  );
}

function filterForm(params, navigate) {
  const status = h(
    "select",
    { id: "filter-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((s) => h("option", { value: s, selected: params.get("status") === s }, s)),
  );
  const text = (id, name) => h("input", { id, name, type: "text", value: params.get(name) || "" });
  const inputs = {
    status,
    name: text("filter-name", "name"),
    workflow: text("filter-workflow", "workflow"),
    schedule_id: text("filter-schedule", "schedule_id"),
  };
  return h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        const query = new URLSearchParams();
        for (const name of FILTERS) if (inputs[name].value) query.set(name, inputs[name].value);
        navigate(`#/jobs${query.toString() ? `?${query}` : ""}`);
      },
    },
    field("Status", inputs.status),
    field("Name", inputs.name),
    field("Workflow", inputs.workflow),
    field("Schedule", inputs.schedule_id),
    h("button", { type: "submit" }, "Filter"),
    // Jobs whose irreversible step's outcome is unknown: a person resolves each.
    h("a", { href: "#/jobs?status=needs_review", class: "button secondary", id: "filter-review" }, "Needs review"),
  );
}

export function jobsView(main, { params, navigate }) {
  const filters = Object.fromEntries(FILTERS.map((n) => [n, params.get(n)]).filter(([, v]) => v));
  const body = h("tbody");
  const messages = h("div", { class: "messages" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const cursors = [null]; // the cursor of each page shown so far
  let page = 0;
  let rows = new Map();

  main.append(
    h("h1", {}, "Jobs"),
    filterForm(params, navigate),
    messages,
    h(
      "table",
      { class: "jobs" },
      h("caption", { class: "visually-hidden" }, "Jobs, newest first"),
      h(
        "thead",
        {},
        h("tr", {}, ["Job", "Name", "Status", "Created", "Duration", "Attempts"].map((t) =>
          h("th", { scope: "col" }, t))),
      ),
      body,
    ),
    pager,
  );

  async function load({ quiet = false } = {}) {
    if (!quiet) messages.replaceChildren(notice("info", "Loading…"));
    // With filters the API may answer a short page that still has a cursor (it reads a
    // bounded number of jobs per request): read on until the page is full or the list ends.
    const found = { jobs: [], next_cursor: cursors[page] };
    try {
      for (let asked = 0; asked < MAX_READS && found.jobs.length < PAGE; asked += 1) {
        const query = { ...filters, limit: PAGE - found.jobs.length, cursor: found.next_cursor };
        const part = await api("/jobs", { query });
        found.jobs.push(...part.jobs);
        found.next_cursor = part.next_cursor;
        if (!part.next_cursor) break;
      }
    } catch (error) {
      messages.replaceChildren(notice("error", `The jobs could not be listed: ${error.message}`));
      return;
    }
    messages.replaceChildren();
    show(found.jobs);
    cursors[page + 1] = found.next_cursor || undefined;
    clear(pager).append(
      h("button", { type: "button", class: "secondary", disabled: page === 0, onclick: () => go(page - 1) }, "Newer"),
      h("span", {}, `Page ${page + 1}`),
      h("button", { type: "button", class: "secondary", disabled: !found.next_cursor, onclick: () => go(page + 1) }, "Older"),
    );
  }

  // The page read again (every second on a busy tenant) keeps each row that did not change
  // where it is: a row rebuilt between a pointer's press and release takes the click away
  // from its link (the press on one element, the release on another).
  function show(jobs) {
    const next = new Map();
    const wanted = jobs.map((job) => {
      const made = row(job);
      const shown = rows.get(job.job_id);
      const kept = shown && shown.isEqualNode(made) ? shown : made;
      next.set(job.job_id, kept);
      return kept;
    });
    rows = next;
    const keep = new Set(wanted);
    for (const tr of [...body.children]) if (!keep.has(tr)) tr.remove();
    wanted.forEach((tr, index) => {
      if (body.children[index] !== tr) body.insertBefore(tr, body.children[index] || null);
    });
    if (!jobs.length) body.append(h("tr", {}, h("td", { colspan: 6 }, "No jobs match.")));
  }

  function go(target) {
    page = target;
    load();
  }

  // At most one reading of the page a second however many jobs change: a busy tenant's
  // stream of changes costs the API one list request a second, not one per job.
  let reloading = null;
  function reloadSoon() {
    if (reloading) return;
    reloading = setTimeout(() => {
      reloading = null;
      load({ quiet: true });
    }, RELOAD_EVERY_MS);
  }

  // A status change: the row's badge, or (first page) the page read again for new or ended
  // jobs, and for rows that may have left the status filter.
  async function changed(message) {
    if (message.type === "subscribed") {
      // (Re)subscribed: changes made while not following are read again, on the first page.
      if (page === 0) load({ quiet: true });
      return;
    }
    if (message.type !== "status") return;
    const shown = rows.get(message.job_id);
    const cell = shown && shown.querySelector(".status-cell");
    if (cell && cell.firstChild && cell.firstChild.dataset.status === message.status) return;
    if (cell && !ended(message.status) && !filters.status) {
      cell.replaceChildren(badge(message.status));
    } else if (page === 0) {
      reloadSoon();
    } else if (cell) {
      cell.replaceChildren(badge(message.status));
    }
  }

  const stop = live.follow({ jobs: "all" }, changed);
  load();
  return stop;
}
