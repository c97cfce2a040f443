// Live session: open a browser session, write or pick one step at a time (checked by the
// same rules as a job's steps, POST /v1/jobs/validate, as you type), run it and see the page
// after it (screenshot and ARIA snapshot), then save the steps that worked as a workflow.

import { api } from "../lib/api.js";
import { field, h, notice, setFieldError } from "../lib/dom.js";
import { json } from "../lib/format.js";
import { liveViewer } from "../lib/viewer.js";

const CHECK_AFTER_MS = 400;
// What picking an action puts in the step box: a step of that kind to edit.
const TEMPLATES = {
  goto: { action: "goto", url: "https://example.com/" },
  click: { action: "click", selector: "button" },
  fill: { action: "fill", selector: "input[name=q]", value: "" },
  press: { action: "press", selector: "input", key: "Enter" },
  select: { action: "select", selector: "select", value: "" },
  wait_for: { action: "wait_for", selector: "main" },
  extract: { action: "extract", name: "title", selector: "h1" },
  scroll: { action: "scroll", to: "bottom" },
};

export function sessionView(main) {
  const state = { id: null, steps: 0 };
  let timer = null; // the pending check of the step box
  let asked = 0; // the latest check asked: older answers are ignored
  const idle = h("input", { id: "session-idle", type: "number", min: 5, max: 1800, value: 300, inputmode: "numeric" });
  const pick = h("select", { id: "session-pick" }, h("option", { value: "" }, "pick a step…"),
    Object.keys(TEMPLATES).map((action) => h("option", { value: action }, action)));
  const step = h("textarea", { id: "session-step", rows: 6, spellcheck: "false", class: "code" },
    json(TEMPLATES.goto));
  const shot = h("input", { id: "session-shot", type: "checkbox", checked: true });
  const verdict = h("p", { class: "verdict", id: "session-verdict", role: "status", "aria-live": "polite" });
  const status = h("p", { id: "session-status", role: "status", "aria-live": "polite" }, "No session open.");
  const messages = h("div", { class: "messages", id: "session-messages" });
  const outcome = h("section", { id: "session-outcome", "aria-labelledby": "session-outcome-title" },
    h("h2", { id: "session-outcome-title" }, "The page after the last step"));
  const history = h("ol", { id: "session-history" });
  const view = h("div", { id: "session-live" }); // the live view of the open session
  let viewer = null;
  const wfName = h("input", { id: "session-workflow", type: "text", maxlength: 100 });
  const wfInputs = h("textarea", { id: "session-inputs", rows: 3, spellcheck: "false", class: "code" }, "{}");
  const run = h("button", { type: "submit", disabled: true }, "Run step");
  const close = h("button", { type: "button", disabled: true, onclick: closeSession }, "Close session");
  const save = h("button", { type: "submit", disabled: true }, "Save as workflow");

  main.append(
    h("h1", {}, "Live session"),
    h("form", { class: "row", onsubmit: openSession },
      field("Idle timeout (seconds)", idle), h("button", { type: "submit", id: "session-open" }, "Open session"), close),
    status, messages,
    h("form", { class: "submit", novalidate: true, onsubmit: runStep },
      field("Pick", pick, { hint: "Fills the step box with a step of that kind." }),
      field("Step (JSON)", step),
      h("label", { for: "session-shot" }, shot, " screenshot after the step"),
      verdict, run),
    outcome, view,
    h("section", { "aria-labelledby": "session-history-title" },
      h("h2", { id: "session-history-title" }, "Steps that ran"), history),
    h("form", { class: "submit", novalidate: true, onsubmit: saveWorkflow },
      h("h2", {}, "Save as a workflow"),
      field("Workflow name", wfName),
      field("Inputs (JSON object)", wfInputs, { hint: "Name literal values of the steps: {\"who\": \"Ada\"} turns each Ada into {{inputs.who}}." }),
      save));

  pick.addEventListener("change", () => {
    if (pick.value) step.value = json(TEMPLATES[pick.value]);
    check();
  });
  step.addEventListener("input", check);
  check();

  function say(kind, text) {
    messages.replaceChildren(notice(kind, text));
  }

  function parsed() {
    try {
      return { value: JSON.parse(step.value) };
    } catch (error) {
      return { error: `not valid JSON: ${error.message}` };
    }
  }

  function check() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const { value, error } = parsed();
      if (error) return showCheck([error]);
      const ticket = ++asked;
      try {
        const answer = await api("/jobs/validate", { method: "POST", body: { steps: [value] } });
        if (ticket === asked) showCheck((answer.errors || []).map((e) => `${e.field}: ${e.message}`));
      } catch (failure) {
        if (ticket === asked) showCheck([failure.message]);
      }
    }, CHECK_AFTER_MS);
  }

  function showCheck(problems) {
    setFieldError(main, "session-step", problems.join("; "));
    verdict.textContent = problems.length ? "Fix the step before running it." : "The step is valid.";
    verdict.dataset.valid = problems.length ? "false" : "true";
  }

  function ready(open) {
    run.disabled = !open;
    close.disabled = !open;
  }

  async function openSession(event) {
    event.preventDefault();
    try {
      const opened = await api("/browser-sessions", { method: "POST", body: { idle_timeout_s: Number(idle.value) } });
      state.id = opened.session_id;
      status.textContent = `Session ${state.id} is ${opened.status}.`;
      status.dataset.session = state.id;
      messages.replaceChildren();
      if (viewer) viewer.stop();
      viewer = liveViewer(state.id); // a session is a job: watched by its id
      view.replaceChildren(viewer.element);
      ready(true);
    } catch (error) {
      say("error", `The session could not be opened: ${error.message}`);
    }
  }

  async function runStep(event) {
    event.preventDefault();
    const { value, error } = parsed();
    if (error || !state.id) return showCheck([error || "open a session first"]);
    run.disabled = true;
    try {
      const answer = await stepAnswer(state.id, value, shot.checked);
      showOutcome(value, answer);
      save.disabled = false;
    } catch (failure) {
      say("error", failure.message);
      if (failure.status === 409) ready(false);
    } finally {
      if (state.id && !close.disabled) run.disabled = false;
    }
  }

  // The path that holds nothing: the call answers 202 at once (wait_s 0) with the command,
  // which is read until it has its answer. Its id makes a resend harmless: it runs once.
  async function stepAnswer(id, value, screenshot) {
    const command_id = crypto.randomUUID();
    const sent = await api(`/browser-sessions/${id}/steps`, {
      method: "POST", body: { step: value, observe: { screenshot }, command_id, wait_s: 0 },
    });
    if (!sent.command_id || sent.answer === undefined) return sent; // answered at once
    let pause = 50;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, pause));
      const read = await api(`/browser-sessions/${id}/commands/${command_id}`);
      if (read.answer) {
        messages.replaceChildren();
        return read.answer;
      }
      if (read.takeover) {
        // Said on the agent's side too: the step waits for the person holding the page.
        const until = new Date(read.takeover.until * 1000).toLocaleTimeString();
        say("info", `The step waits: ${read.takeover.holder} holds the page until ${until}.`);
      }
      if (read.state === "lost") throw new Error("the session's worker went while the step ran");
      pause = Math.min(500, pause * 2);
    }
  }

  function showOutcome(value, answer) {
    const seen = answer.observation || {};
    history.append(h("li", { class: answer.ok ? "ok" : "failed" }, h("code", {}, JSON.stringify(value)),
      answer.ok ? " — ok" : ` — failed: ${answer.error && answer.error.message}`));
    outcome.replaceChildren(
      h("h2", { id: "session-outcome-title" }, "The page after the last step"),
      answer.ok ? notice("info", "The step ran.") : notice("error", `The step failed: ${answer.error && answer.error.message}`),
      h("p", {}, "URL: ", h("span", { class: "mono", id: "session-url" }, seen.url || "")),
      h("p", {}, "Title: ", h("span", { id: "session-title" }, seen.title || "")),
      Object.keys(answer.result || {}).length ? h("pre", { class: "code", id: "session-result" }, json(answer.result)) : null,
      seen.screenshot_url ? h("img", { id: "session-screenshot", src: seen.screenshot_url, alt: `The page at ${seen.url || ""}` }) : null,
      h("h3", {}, "ARIA snapshot"),
      h("pre", { class: "code", id: "session-aria", tabindex: "0" }, seen.aria_snapshot || ""));
  }

  async function closeSession() {
    if (!state.id) return;
    try {
      const closed = await api(`/browser-sessions/${state.id}`, { method: "DELETE" });
      status.textContent = `Session ${state.id} is ${closed.status === "ready" ? "closing" : closed.status}.`;
      if (viewer) viewer.stop();
      ready(false);
    } catch (error) {
      say("error", error.message);
    }
  }

  async function saveWorkflow(event) {
    event.preventDefault();
    setFieldError(main, "session-workflow", "");
    setFieldError(main, "session-inputs", "");
    let inputs;
    try {
      inputs = JSON.parse(wfInputs.value || "{}");
    } catch (error) {
      return setFieldError(main, "session-inputs", `not valid JSON: ${error.message}`);
    }
    try {
      const saved = await api(`/browser-sessions/${state.id}/save-as-workflow`, {
        method: "POST", body: { name: wfName.value.trim(), inputs },
      });
      messages.replaceChildren(notice("info", `Saved ${saved.steps} steps as `),
        h("a", { href: `#/workflows/${encodeURIComponent(saved.name)}`, id: "session-saved" }, `${saved.name}@${saved.version}`));
    } catch (error) {
      const target = (error.field || "").startsWith("inputs") ? "session-inputs" : "session-workflow";
      setFieldError(main, target, error.message);
    }
  }
}
