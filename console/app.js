// The console: a hash router over the views, the sign-in guard and the page's frame.

import { apiKey, loadConfig, onUnauthorized, signOut } from "./lib/api.js";
import { clear, h } from "./lib/dom.js";
import { live } from "./lib/live.js";
import { fleetView } from "./views/fleet.js";
import { jobView } from "./views/job.js";
import { jobsView } from "./views/jobs.js";
import { scheduleView } from "./views/schedule.js";
import { schedulesView } from "./views/schedules.js";
import { sessionView } from "./views/session.js";
import { signInView } from "./views/signin.js";
import { submitView } from "./views/submit.js";
import { usageView } from "./views/usage.js";
import { workflowsView } from "./views/workflows.js";

const NAV = [
  ["#/jobs", "Jobs"],
  ["#/submit", "Submit"],
  ["#/session", "Live session"],
  ["#/workflows", "Workflows"],
  ["#/schedules", "Schedules"],
  ["#/usage", "Usage"],
  ["#/fleet", "Fleet"],
];

// [pattern, view, title]: the first match renders.
const ROUTES = [
  [/^\/jobs\/([A-Za-z0-9_-]+)$/, jobView, "Job"],
  [/^\/jobs$/, jobsView, "Jobs"],
  [/^\/submit$/, submitView, "Submit a job"],
  [/^\/session$/, sessionView, "Live session"],
  [/^\/workflows(?:\/([^/]+))?$/, workflowsView, "Workflows"],
  [/^\/schedules\/([0-9A-Za-z]{26})$/, scheduleView, "Schedule"],
  [/^\/schedules$/, schedulesView, "Schedules"],
  [/^\/usage$/, usageView, "Usage and cost"],
  [/^\/fleet$/, fleetView, "Fleet"],
];

let cleanup = null;

function parseHash() {
  const raw = window.location.hash.replace(/^#/, "") || "/jobs";
  const [path, search = ""] = raw.split("?");
  return { path, params: new URLSearchParams(search) };
}

export function navigate(hash) {
  if (window.location.hash === hash) render();
  else window.location.hash = hash;
}

function frame(main) {
  const root = document.getElementById("app");
  clear(root);
  const status = h("span", { class: "live-state", role: "status", "aria-live": "polite" });
  live.onState((state) => {
    status.textContent = { open: "live", connecting: "connecting…", closed: "live off" }[state];
    status.dataset.state = state;
  });
  const current = parseHash().path;
  const header = h(
    "header",
    { class: "top" },
    h("a", { class: "brand", href: "#/jobs" }, "pagefleet"),
    h(
      "nav",
      { "aria-label": "Console" },
      h(
        "ul",
        {},
        NAV.map(([href, text]) =>
          h(
            "li",
            {},
            h("a", { href, "aria-current": current.startsWith(href.slice(1)) ? "page" : null }, text),
          ),
        ),
      ),
    ),
    status,
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        onclick: () => {
          live.stop();
          signOut();
          navigate("#/signin");
        },
      },
      "Sign out",
    ),
  );
  root.append(header, main);
}

async function render() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const { path, params } = parseHash();
  const main = h("main", { id: "main", tabindex: "-1" });
  if (!apiKey() || path === "/signin") {
    live.stop();
    const root = clear(document.getElementById("app"));
    root.append(main);
    document.title = "Sign in · pagefleet";
    cleanup = signInView(main, { params, navigate });
    return;
  }
  live.start();
  frame(main);
  for (const [pattern, view, title] of ROUTES) {
    const match = path.match(pattern);
    if (match) {
      document.title = `${title} · pagefleet`;
      cleanup = view(main, { params, match, navigate }) || null;
      return;
    }
  }
  document.title = "Not found · pagefleet";
  main.append(h("h1", {}, "Page not found"), h("p", {}, h("a", { href: "#/jobs" }, "Go to the jobs")));
}

onUnauthorized(() => {
  live.stop();
  signOut();
  navigate("#/signin?expired=1");
});

await loadConfig();
window.addEventListener("hashchange", render);
render();
