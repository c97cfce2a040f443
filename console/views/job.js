// One job: status, attempts, irreversible steps' checkpoints, steps with timings, the live
// log, screenshots, artifacts and result; Cancel and "Run again", and for a job that needs
// review the two answers to its question. Another tenant's job reads as not found.

import { api } from "../lib/api.js";
import { clear, h, notice, table } from "../lib/dom.js";
import { between, bytes, json, seconds, when } from "../lib/format.js";
import { changesPart } from "../lib/changes.js";
import { againBody, badge, ended, jobLabel } from "../lib/jobs.js";
import { live } from "../lib/live.js";
import { liveViewer } from "../lib/viewer.js";

const EVENT_PAGE = 500;
// Artifact links are made again once this share of their life has passed.
const LINKS_RENEWED_AT = 0.8;

function section(title, id, ...children) {
  return h("section", { "aria-labelledby": `${id}-title`, id },
    h("h2", { id: `${id}-title` }, title), ...children);
}

function summary(job) {
  const items = [
    ["Name", jobLabel(job)],
    ["Created", when(job.created_at)],
    ["Started", when(job.started_at)],
    ["Finished", when(job.finished_at)],
    ["Duration", ended(job.status) ? seconds(between(job.started_at, job.finished_at)) : "—"],
    ["Attempts", String(job.attempt)],
    ["Pool", job.pool || "—"],
  ];
  if (job.schedule_id) items.push(["Schedule", h("a", { href: `#/schedules/${job.schedule_id}`, class: "mono" }, job.schedule_id)]);
  if (job.run_at) items.push(["Runs at", when(new Date(job.run_at * 1000).toISOString())]);
  if (job.deferred_reason) items.push(["Waiting because", job.deferred_reason]);
  if (job.takeover) {
    const t = job.takeover;
    items.push(["Taken over", `by ${t.holder} until ${when(new Date(t.until * 1000).toISOString())}: its steps wait`]);
  }
  if (job.compensation) {
    const c = job.compensation;
    items.push(["Compensation", `${c.state}${c.error ? `: ${c.error}` : ""}`]);
  }
  if (job.resolution) {
    const r = job.resolution;
    items.push(["Resolved", `${r.outcome.replace("_", " ")}${r.continue ? ", continued" : ""} by ${r.by}, ${when(r.at)}`]);
  }
  return h("dl", { class: "summary" }, items.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function errorBlock(job) {
  if (!job.error) return null;
  const e = job.error;
  return h("div", { class: "job-error", role: "note" },
    h("strong", {}, `${e.kind || e.code || "error"}: `), e.message || "",
    e.step !== undefined && e.step !== null ? h("p", {}, `at step ${e.step}`) : null);
}

function checkpointsTable(job) {
  if (!job.checkpoints || !job.checkpoints.length) return null;
  return section("Irreversible steps", "checkpoints",
    table(["Step", "Label", "State", "How", "Attempt", "At"], job.checkpoints.map((c) =>
      h("tr", { dataset: { step: c.step, state: c.state } },
        h("td", { class: "num" }, String(c.step)),
        h("td", {}, c.label),
        h("td", { class: `checkpoint-${c.state}` }, c.state.replace("_", " ")),
        h("td", {}, c.how),
        h("td", { class: "num" }, String(c.attempt)),
        h("td", {}, when(c.at))))));
}

function attemptsTable(job) {
  if (!job.attempts || !job.attempts.length) return h("p", {}, "Not started yet.");
  return table(["#", "Worker", "Started", "Finished", "Outcome", "Error"], job.attempts.map((a) =>
    h("tr", {},
      h("td", { class: "num" }, String(a.attempt)),
      h("td", { class: "mono" }, a.worker),
      h("td", {}, when(a.started_at)),
      h("td", {}, when(a.finished_at)),
      h("td", {}, a.status ? badge(a.status) : "running"),
      h("td", {}, a.error ? `${a.error.kind || ""} ${a.error.message || ""}`.trim() : "—"))));
}

function logLine(event) {
  const at = new Date(event.at).toLocaleTimeString();
  let text;
  switch (event.type) {
    case "state": text = `attempt ${event.attempt ?? ""} ${event.status}`; break;
    case "step_started": text = `step ${event.path || event.index} started: ${event.label || event.action || ""}`; break;
    case "step_finished": text = `step ${event.path || event.index} ${event.outcome} in ${event.duration_ms} ms`; break;
    case "navigation": text = `navigated to ${event.url}`; break;
    case "retry": text = `will retry in ${event.delay_s} s: ${event.kind || ""} ${event.reason || ""}`; break;
    case "checkpoint": text = `step ${event.index} ${event.state} (${event.how}): ${event.label || ""}`; break;
    case "compensation": text = `compensation ${event.state}${event.message ? `: ${event.message}` : ""}`; break;
    case "truncated": text = `${event.dropped} events dropped`; break;
    case "dialog": text = `${event.dialog} dialog ${event.outcome}: ${event.message || ""}`; break;
    default: text = `${event.level ? `[${event.level}] ` : ""}${event.message || ""}`;
  }
  return h("li", { class: `log-${event.type}`, dataset: { seq: event.seq } },
    h("time", { datetime: event.at }, at), " ", h("span", { class: "log-type" }, event.type), " ", text);
}

function stepsTable(steps) {
  if (!steps.size) return h("p", {}, "No steps have run yet.");
  // Cost: the step's share of the job's price (its browser time at the rate usage prices).
  return table(["Step", "Action", "Started", "Took", "Cost", "Outcome"], [...steps.values()].map((s) =>
    h("tr", {},
      h("td", { class: "mono" }, s.path || String(s.index)),
      h("td", {}, s.label || s.action || ""),
      h("td", {}, s.at ? new Date(s.at).toLocaleTimeString() : "—"),
      h("td", {}, s.duration_ms !== undefined ? `${s.duration_ms} ms` : "…"),
      h("td", { class: "num step-cost" }, s.cost_usd !== undefined ? `$${s.cost_usd.toFixed(7)}` : "—"),
      h("td", {}, s.outcome || "running"))));
}

function artifactsPart(job, links) {
  if (!links.length) return [h("p", {}, ended(job.status) ? "No artifacts." : "None yet.")];
  const images = links.filter((a) => (a.content_type || "").startsWith("image/"));
  const trace = links.find((a) => a.name.endsWith("trace.zip"));
  const har = links.find((a) => a.name.endsWith("har.zip"));
  return [
    images.length ? h("div", { class: "shots" }, images.map((a) =>
      h("figure", {},
        h("a", { href: a.url, target: "_blank", rel: "noopener", dataset: { link: `open:${a.name}` } },
          h("img", { src: a.url, alt: `Screenshot ${a.name} (attempt ${a.attempt ?? 1})`, loading: "lazy" })),
        h("figcaption", {}, a.name)))) : null,
    table(["Name", "Size", "Type", "sha256", ""], links.map((a) =>
      h("tr", {},
        h("td", { class: "mono" }, a.name),
        h("td", { class: "num", dataset: { value: a.size } }, bytes(a.size)),
        h("td", {}, a.content_type),
        h("td", { class: "mono hash" }, a.sha256),
        h("td", {}, h("a", { href: a.url, download: a.name.split("/").pop(), dataset: { link: `download:${a.name}` } }, "Download", h("span", { class: "visually-hidden" }, ` ${a.name}`)))))),
    trace ? h("div", { class: "trace-help" },
      h("h3", {}, "Open the trace"),
      h("p", {}, "Download ", h("code", {}, trace.name), " and open it in Playwright's trace viewer:"),
      h("pre", {}, h("code", {}, `python -m playwright show-trace ${trace.name.split("/").pop()}`)),
      h("p", {}, "or drop the file on trace.playwright.dev, which reads it in your browser without uploading it.")) : null,
    har ? h("div", { class: "har-help" },
      h("h3", {}, "The recorded traffic"),
      h("p", {}, h("a", { id: "har-link", href: har.url, download: "har.zip", dataset: { link: "har" } }, "Download the HAR"),
        ` (${bytes(har.size)}, sha256 `, h("code", {}, har.sha256.slice(0, 12)), "…): every request and response of the run, ",
        "with credentials and the job's secrets redacted. Unzip it and import the .har file in the Network panel of your browser's developer tools.")) : null,
  ];
}

export function jobView(main, { match, params, navigate }) {
  const jobId = match[1];
  const head = h("div", { class: "job-head" });
  const messages = h("div", { class: "messages" });
  const details = h("div", { class: "job-details" });
  const stepsPart = h("div");
  // Focusable: a long log scrolls, and a keyboard must reach it too.
  const log = h("ol", { class: "log", id: "job-log", tabindex: "0", "aria-live": "polite", "aria-relevant": "additions" });
  const artifacts = h("div");
  const changes = h("section", { "aria-labelledby": "changes-title", id: "changes", hidden: true },
    h("h2", { id: "changes-title" }, "Changes"));
  const result = h("div");
  const steps = new Map();
  const seen = new Set();
  let job = null;
  let stop = () => {};
  let closed = false;
  let links = { until: Infinity, timer: 0 }; // when the shown links are due to be made again
  // A notification's link: watch at once, and take over if the job waits for a person.
  const viewer = liveViewer(jobId, {
    watchNow: params.get("live") === "1",
    takeOverNow: () => (job ? params.get("takeover") === "1" && job.status === "waiting_for_human" : null),
  });

  main.append(head, messages, viewer.element, details, changes,
    section("Steps", "steps", stepsPart),
    section("Live log", "log", log),
    section("Screenshots and artifacts", "artifacts", artifacts),
    section("Result", "result", result));

  function addEvents(events) {
    let stepsChanged = false;
    for (const event of events) {
      if (seen.has(event.seq)) continue;
      seen.add(event.seq);
      log.append(logLine(event));
      if (event.type === "takeover") refresh(); // who holds the page shows on both sides
      if (event.type === "step_started" || event.type === "step_finished") {
        const key = `${event.attempt}:${event.path || event.index}`;
        steps.set(key, { ...(steps.get(key) || {}), ...event, at: (steps.get(key) || event).at });
        stepsChanged = true;
      }
    }
    if (stepsChanged) stepsPart.replaceChildren(stepsTable(steps));
  }

  function showHead() {
    const cancel = h("button", {
      type: "button", class: "danger", disabled: ended(job.status) || !!job.cancel_requested_at,
      onclick: async () => {
        try {
          const answer = await api(`/jobs/${jobId}/cancel`, { method: "POST" });
          messages.replaceChildren(notice("info", answer.status === "cancelled" ? "Cancelled." : "Stopping the job…"));
          refresh();
        } catch (error) {
          messages.replaceChildren(notice("error", `Cancel failed: ${error.message}`));
        }
      },
    }, "Cancel");
    const again = h("button", {
      type: "button", class: "secondary",
      onclick: async () => {
        try {
          const made = await api("/jobs", { method: "POST", body: againBody(job) });
          navigate(`#/jobs/${made.job_id}`);
        } catch (error) {
          messages.replaceChildren(notice("error", `Run again failed: ${error.message}`));
        }
      },
    }, "Run again");
    // A failed job with its recorded traffic: run the same steps against that traffic only.
    const hasHar = (job.artifacts || []).some((a) => a.name === "har.zip");
    const replay = job.status === "failed" && hasHar ? h("button", {
      type: "button", class: "secondary", id: "replay-offline",
      onclick: async () => {
        try {
          const made = await api(`/jobs/${jobId}/replay`, { method: "POST", body: { offline: true } });
          navigate(`#/jobs/${made.job_id}`);
        } catch (error) {
          messages.replaceChildren(notice("error", `Replay failed: ${error.message}`));
        }
      },
    }, "Replay offline") : "";
    const jobLink = (id) => h("a", { href: `#/jobs/${id}`, class: "mono" }, id);
    const links = [
      job.replay_of ? h("p", { id: "replay-of" }, "Offline replay of job ", jobLink(job.replay_of), " (answered from its recorded traffic).") : "",
      (job.replays || []).length ? h("p", { id: "replays" }, "Replayed offline by ",
        ...job.replays.flatMap((id, i) => (i ? [", ", jobLink(id)] : [jobLink(id)])), ".") : "",
    ];
    clear(head).append(
      h("h1", {}, "Job ", h("span", { class: "mono" }, jobId)),
      h("p", { class: "job-status" }, "Status: ", h("span", { id: "job-status" }, badge(job.status))),
      ...links,
      h("div", { class: "actions" }, cancel, again, replay),
      job.status === "needs_review" ? reviewPart() : "",
      job.status === "waiting_for_human" ? humanPart() : "");
  }

  // A job an await_human step parked: what it asks, and the button that lets it go on.
  function humanPart() {
    const asked = job.human || {};
    const note = h("input", { type: "text", id: "human-note", maxlength: "2000",
      placeholder: "What you did (optional)" });
    const goOn = async () => {
      try {
        const body = note.value ? { note: note.value } : {};
        await api(`/jobs/${jobId}/continue`, { method: "POST", body });
        messages.replaceChildren(notice("info", "Continued: the job goes on in the same browser."));
        refresh();
      } catch (error) {
        messages.replaceChildren(notice("error", `Continue failed: ${error.message}`));
      }
    };
    const until = asked.timeout_at ? new Date(asked.timeout_at * 1000).toISOString() : "";
    return h("section", { class: "review", id: "human", "aria-labelledby": "human-title" },
      h("h2", { id: "human-title" }, "Waiting for you"),
      h("p", { id: "human-prompt" }, asked.prompt || "The job asks for a person."),
      h("p", { class: "hint" }, asked.continued_at
        ? "Continued: its worker resumes it within seconds."
        : `It waits until ${until}, then fails (human_timeout).`),
      h("div", { class: "actions" }, note,
        h("button", { type: "button", id: "human-continue", onclick: goOn,
          disabled: asked.continued_at ? "" : null }, "Continue the job")));
  }

  // The person's answer to a job in review: did its irreversible step take effect?
  function reviewPart() {
    // The step at stake: the last irreversible one not settled as "not done".
    const step = (job.checkpoints || []).filter((c) => c.state !== "not_done")
      .sort((a, b) => b.step - a.step)[0];
    const goOn = h("input", { type: "checkbox", id: "review-continue" });
    const resolve = (outcome) => async () => {
      try {
        const body = { outcome, continue: outcome === "done" && goOn.checked };
        const answer = await api(`/jobs/${jobId}/resolve`, { method: "POST", body });
        messages.replaceChildren(notice("info", answer.status === "succeeded"
          ? "Resolved: the job succeeded with the results it had."
          : "Resolved: the job runs again."));
        refresh();
      } catch (error) {
        messages.replaceChildren(notice("error", `Resolve failed: ${error.message}`));
      }
    };
    return h("section", { class: "review", id: "review", "aria-labelledby": "review-title" },
      h("h2", { id: "review-title" }, "Needs review"),
      h("p", {}, step
        ? `Did step ${step.step} (${step.label}) take effect? The platform could not tell, and will not run it again on its own.`
        : "This job stopped where the platform cannot tell what happened."),
      h("p", { class: "hint" }, "Look at the site (the failure screenshot and HTML are below), then answer."),
      h("div", { class: "actions" },
        h("button", { type: "button", id: "review-done", onclick: resolve("done") }, "Done: it happened"),
        h("button", { type: "button", id: "review-not-done", class: "secondary", onclick: resolve("not_done") }, "Not done: run it again"),
        h("label", { for: "review-continue" }, goOn, " with Done, run the steps after it")));
  }

  async function refresh() {
    try {
      job = await api(`/jobs/${jobId}`);
    } catch (error) {
      if (closed) return;
      if (error.status === 404) {
        stop();
        main.replaceChildren(h("h1", {}, "Job not found"),
          h("p", {}, `There is no job ${jobId} in your account.`),
          h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs")));
      } else {
        messages.replaceChildren(notice("error", `The job could not be read: ${error.message}`));
      }
      return false;
    }
    if (closed) return false;
    showHead();
    details.replaceChildren(summary(job), errorBlock(job) || "", checkpointsTable(job) || "",
      section("Attempts", "attempts", attemptsTable(job)));
    if (job.result !== null && job.result !== undefined) {
      result.replaceChildren(h("pre", { class: "json", id: "job-result", tabindex: "0" }, json(job.result)));
    } else if (job.result_artifact) {
      result.replaceChildren(h("p", {}, "The result is too large to show; it is the artifact ", h("code", {}, job.result_artifact), "."));
    } else {
      result.replaceChildren(h("p", {}, ended(job.status) ? "No result." : "Not yet."));
    }
    await showArtifacts();
    return !closed;
  }

  // The artifacts' links are presigned: S3 refuses each one `expires_in` seconds after it
  // was made. While the page is open the list is read again before they run out, and a link
  // followed after that (a computer asleep runs no timer) is read again first.
  async function showArtifacts() {
    clearTimeout(links.timer);
    let list;
    try {
      list = await api(`/jobs/${jobId}/artifacts`);
    } catch (error) {
      if (!closed) artifacts.replaceChildren(notice("error", `Artifacts could not be listed: ${error.message}`));
      return;
    }
    if (closed) return;
    artifacts.replaceChildren(...artifactsPart(job, list.artifacts).filter(Boolean));
    if (job.changes) {
      changes.hidden = false;
      changes.replaceChildren(h("h2", { id: "changes-title" }, "Changes"), ...changesPart(job.changes, list.artifacts));
    }
    const life = Math.min(...list.artifacts.map((a) => a.expires_in ?? Infinity)) * 1000 * LINKS_RENEWED_AT;
    links = Number.isFinite(life)
      ? { until: Date.now() + life, timer: setTimeout(showArtifacts, life) }
      : { until: Infinity, timer: 0 };
  }

  async function followFresh(event) {
    const link = event.target.closest("a[data-link]");
    if (!link || Date.now() < links.until) return;
    event.preventDefault();
    await showArtifacts();
    const fresh = [...main.querySelectorAll("a[data-link]")].find((a) => a.dataset.link === link.dataset.link);
    if (fresh && Date.now() < links.until) fresh.click();
  }

  // Stored events after `after`, page by page; the last seq read.
  async function readEvents(after) {
    for (;;) {
      let page;
      try {
        page = await api(`/jobs/${jobId}/events`, { query: { after, limit: EVENT_PAGE } });
      } catch {
        return after;
      }
      addEvents(page.events);
      after = page.next_after;
      if (!page.more || closed) return after;
    }
  }

  async function start() {
    if (!(await refresh())) return;
    const after = await readEvents(0);
    if (!steps.size) stepsPart.replaceChildren(stepsTable(steps));
    if (closed) return;
    stop = live.follow({ job_id: jobId }, (message) => {
      if (message.type === "events") {
        addEvents(message.events || []);
        // More was written than one message holds: the rest is read from the API.
        if (message.more) readEvents(message.next_after);
      } else if (message.type === "status" && job && message.status !== job.status) {
        refresh();
      }
    }, { after });
  }

  artifacts.addEventListener("click", followFresh);
  changes.addEventListener("click", followFresh);
  start();
  return () => {
    closed = true;
    clearTimeout(links.timer);
    viewer.stop();
    stop();
  };
}
