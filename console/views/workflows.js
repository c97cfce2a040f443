// Named workflows: the list, one workflow's versions and definition, and the diff between
// two versions.

import { api } from "../lib/api.js";
import { field, h, notice, table } from "../lib/dom.js";
import { json, when } from "../lib/format.js";

function diffView(text) {
  if (!text) return h("p", {}, "The two versions are the same.");
  const lines = text.split("\n").map((line) => {
    let kind = "same";
    if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
    else if (line.startsWith("@@")) kind = "hunk";
    else if (line.startsWith("+")) kind = "added";
    else if (line.startsWith("-")) kind = "removed";
    return h("span", { class: `diff-${kind}` }, `${line}\n`);
  });
  return h("pre", { class: "diff", id: "workflow-diff", tabindex: "0" }, lines);
}

function listPart(main) {
  const part = h("div", {}, notice("info", "Loading…"));
  main.append(h("h1", {}, "Workflows"), part);
  api("/workflows").then((list) => {
    if (!list.workflows.length) {
      part.replaceChildren(h("p", {}, "No named workflows yet. Store one with ",
        h("code", {}, "PUT /v1/workflows/{name}"), " or ", h("code", {}, "pagefleet workflows put"), "."));
      return;
    }
    part.replaceChildren(table(["Name", "Latest version", ""], list.workflows.map((w) =>
      h("tr", {},
        h("td", {}, h("a", { href: `#/workflows/${encodeURIComponent(w.name)}` }, w.name)),
        h("td", { class: "num" }, String(w.latest_version)),
        h("td", {}, h("a", { href: `#/submit?workflow=${encodeURIComponent(w.name)}` }, "Run", h("span", { class: "visually-hidden" }, ` ${w.name}`)))))));
  }).catch((error) => part.replaceChildren(notice("error", `Workflows could not be listed: ${error.message}`)));
}

function detailPart(main, name) {
  const base = `/workflows/${encodeURIComponent(name)}`;
  const definition = h("div");
  const diff = h("div");
  const shown = h("select", { id: "workflow-version" });
  const from = h("select", { id: "diff-from" });
  const to = h("select", { id: "diff-to" });
  const messages = h("div", { class: "messages" });
  main.append(
    h("p", {}, h("a", { href: "#/workflows" }, "All workflows")),
    h("h1", {}, "Workflow ", h("span", { class: "mono" }, name)),
    messages,
    h("section", { "aria-labelledby": "diff-title" },
      h("h2", { id: "diff-title" }, "Compare versions"),
      h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); compare(); } },
        field("From", from), field("To", to), h("button", { type: "submit" }, "Compare")),
      diff),
    h("section", { "aria-labelledby": "definition-title" },
      h("h2", { id: "definition-title" }, "Definition"),
      h("div", { class: "row" }, field("Version", shown)), definition));

  async function showVersion() {
    try {
      const found = await api(`${base}/versions/${shown.value}`);
      definition.replaceChildren(
        h("p", {}, `Stored ${when(found.created_at)}. `,
          h("a", { href: `#/submit?workflow=${encodeURIComponent(`${name}@${found.version}`)}` }, `Run version ${found.version}`)),
        h("pre", { class: "json", tabindex: "0" }, json(found.definition)));
    } catch (error) {
      definition.replaceChildren(notice("error", error.message));
    }
  }

  async function compare() {
    try {
      const answer = await api(`${base}/diff`, { query: { from: from.value, to: to.value } });
      diff.replaceChildren(diffView(answer.diff));
    } catch (error) {
      diff.replaceChildren(notice("error", `The versions could not be compared: ${error.message}`));
    }
  }

  api(base).then((latest) => {
    const versions = latest.versions || [latest.version];
    for (const select of [shown, from, to]) {
      select.replaceChildren(...[...versions].reverse().map((v) => h("option", { value: String(v) }, `version ${v}`)));
    }
    shown.value = String(latest.version);
    to.value = String(latest.version);
    from.value = String(versions.length > 1 ? versions[versions.length - 2] : latest.version);
    shown.addEventListener("change", showVersion);
    showVersion();
    if (versions.length > 1) compare();
  }).catch((error) => {
    messages.replaceChildren(notice("error", error.status === 404 ? `There is no workflow ${name}.` : error.message));
  });
}

export function workflowsView(main, { match }) {
  if (match[1]) detailPart(main, decodeURIComponent(match[1]));
  else listPart(main);
}
