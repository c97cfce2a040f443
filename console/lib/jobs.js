// What several views show of a job: its status badge, its label, whether it has ended.

import { h } from "./dom.js";

export const STATUSES = [
  "scheduled", "waiting", "queued", "running", "retry_scheduled", "waiting_for_human",
  "needs_review",
  "succeeded", "failed", "timed_out", "cancelled", "expired", "dead_lettered",
];

const ENDED = new Set(["succeeded", "failed", "timed_out", "cancelled", "expired", "dead_lettered"]);

export function ended(status) {
  return ENDED.has(status);
}

export function badge(status) {
  return h("span", { class: `badge status-${status}`, dataset: { status } }, status.replace("_", " "));
}

export function jobLabel(job) {
  const request = job.request || {};
  if (job.workflow) return `${job.workflow}@${job.workflow_version ?? "latest"}`;
  return request.name || `${(request.steps || []).length} steps`;
}

// A body that submits the same job again now (no delay, no start time, no parents).
export function againBody(job) {
  const request = { ...(job.request || {}) };
  for (const name of ["delay_seconds", "run_at", "depends_on", "deadline"]) delete request[name];
  if (job.workflow) {
    request.workflow = `${job.workflow}@${job.workflow_version}`;
    delete request.steps;
  }
  return request;
}
