// Submit a job: inline steps (checked against the workflow language as you type) or a named
// workflow version, with inputs, options, priority and delay. The API's errors are shown
// next to the field they name.

import { api } from "../lib/api.js";
import { field, h, notice, setFieldError } from "../lib/dom.js";
import { json } from "../lib/format.js";

const CHECK_AFTER_MS = 400;
const EXAMPLE_STEPS = [
  { action: "goto", url: "https://example.com/" },
  { action: "extract", name: "title", selector: "h1" },
  { action: "screenshot", name: "page.png" },
];

// The control each top-level field of the request is edited in.
const CONTROL_OF = {
  steps: "submit-steps",
  compensate: "submit-compensate",
  workflow: "submit-workflow",
  inputs: "submit-inputs",
  options: "submit-options",
  priority: "submit-priority",
  delay_seconds: "submit-delay",
  name: "submit-name",
};

function controlFor(path) {
  const top = String(path || "").split(/[.[]/)[0];
  return CONTROL_OF[top] || null;
}

function parseJson(text, controlId, errors, fallback) {
  if (!text.trim()) return fallback;
  try {
    return JSON.parse(text);
  } catch (error) {
    errors.push({ control: controlId, message: `not valid JSON: ${error.message}` });
    return undefined;
  }
}

// Step actions named by the schema (each step model's `action` constant), as a hint.
function actionsOf(schema) {
  const found = new Set();
  for (const definition of Object.values((schema && (schema.$defs || schema.definitions)) || {})) {
    const action = definition && definition.properties && definition.properties.action;
    if (action && (action.const || (action.enum && action.enum.length === 1))) {
      found.add(action.const || action.enum[0]);
    }
  }
  return [...found].sort();
}

export function submitView(main, { params, navigate }) {
  const preset = params.get("workflow");
  const mode = { value: preset ? "named" : "steps" };
  const steps = h("textarea", { id: "submit-steps", rows: 14, spellcheck: "false", class: "code" }, json(EXAMPLE_STEPS));
  const compensate = h("textarea", { id: "submit-compensate", rows: 3, spellcheck: "false", class: "code" });
  const idempotencyKey = h("input", { id: "submit-idempotency-key", type: "text", maxlength: 255 });
  const workflow = h("select", { id: "submit-workflow" }, h("option", { value: "" }, "choose a workflow"));
  const version = h("select", { id: "submit-version" }, h("option", { value: "" }, "latest"));
  const inputs = h("textarea", { id: "submit-inputs", rows: 4, spellcheck: "false", class: "code" }, "{}");
  const options = h("textarea", { id: "submit-options", rows: 4, spellcheck: "false", class: "code" }, "{}");
  const priority = h("select", { id: "submit-priority" },
    ["high", "normal", "low"].map((p) => h("option", { value: p, selected: p === "normal" }, p)));
  const delay = h("input", { id: "submit-delay", type: "number", min: 0, step: 1, inputmode: "numeric" });
  const name = h("input", { id: "submit-name", type: "text", maxlength: 200 });
  const general = h("div", { class: "messages", id: "submit-messages" });
  const verdict = h("p", { class: "verdict", id: "submit-verdict", role: "status", "aria-live": "polite" });
  const actionsHint = h("span");
  const stepsField = h("div", {}, field("Steps (JSON)", steps, { hint: actionsHint }),
    field("Compensate (JSON, optional)", compensate, {
      hint: "Steps run once if the job fails after an irreversible step took effect (cancel the order).",
    }));
  const namedField = h("div", {}, field("Workflow", workflow), field("Version", version));

  const radios = ["steps", "named"].map((value) => h("input", {
    type: "radio", name: "source", id: `source-${value}`, value, checked: mode.value === value,
    onchange: () => { mode.value = value; showMode(); check(); },
  }));
  const source = h("fieldset", { class: "source" }, h("legend", {}, "Run"),
    h("label", { for: "source-steps" }, radios[0], " steps written here"),
    h("label", { for: "source-named" }, radios[1], " a named workflow"));

  function showMode() {
    stepsField.hidden = mode.value !== "steps";
    namedField.hidden = mode.value !== "named";
  }

  const form = h("form", { class: "submit", novalidate: true, onsubmit: submit },
    h("h1", {}, "Submit a job"), source, stepsField, namedField,
    field("Inputs (JSON object)", inputs, { hint: "Values for {{inputs.name}} in the steps." }),
    field("Options (JSON object)", options, { hint: "e.g. {\"trace\": true, \"har\": \"on_failure\", \"block\": {\"resource_types\": [\"image\", \"font\"]}, \"dialogs\": \"accept\"}" }),
    h("div", { class: "row" }, field("Priority", priority), field("Delay (seconds)", delay), field("Name", name)),
    field("Idempotency-Key (optional)", idempotencyKey, {
      hint: "The same key returns the same job; steps may use it as {{job.idempotency_key}}.",
    }),
    verdict, general, h("button", { type: "submit" }, "Submit"));
  main.append(form);
  showMode();

  // The request as typed, and the errors found before asking the API (JSON syntax).
  function compose() {
    const errors = [];
    const body = {};
    if (mode.value === "steps") {
      const parsed = parseJson(steps.value, "submit-steps", errors, []);
      if (parsed !== undefined) body.steps = parsed;
      const undo = parseJson(compensate.value, "submit-compensate", errors, null);
      if (undo) body.compensate = undo;
    } else if (workflow.value) {
      body.workflow = version.value ? `${workflow.value}@${version.value}` : workflow.value;
    } else {
      errors.push({ control: "submit-workflow", message: "choose a workflow" });
    }
    const inputValues = parseJson(inputs.value, "submit-inputs", errors, {});
    if (inputValues !== undefined && Object.keys(inputValues).length) body.inputs = inputValues;
    const optionValues = parseJson(options.value, "submit-options", errors, {});
    if (optionValues !== undefined && Object.keys(optionValues).length) body.options = optionValues;
    body.priority = priority.value;
    if (delay.value !== "") body.delay_seconds = Number(delay.value);
    if (name.value.trim()) body.name = name.value.trim();
    return { body, errors };
  }

  function show(errors) {
    for (const id of Object.values(CONTROL_OF)) setFieldError(form, id, "");
    general.replaceChildren();
    const byControl = new Map();
    for (const error of errors) {
      const control = error.control || controlFor(error.field);
      const text = error.control || !error.field ? error.message : `${error.field}: ${error.message}`;
      if (!control) {
        general.append(notice("error", text));
        continue;
      }
      byControl.set(control, [...(byControl.get(control) || []), text]);
    }
    for (const [control, texts] of byControl) setFieldError(form, control, texts.join("; "));
    verdict.textContent = errors.length ? `${errors.length} problem${errors.length > 1 ? "s" : ""} to fix` : "Looks valid.";
    verdict.dataset.valid = errors.length ? "false" : "true";
  }

  let timer = null;
  let asked = 0;
  async function check() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const { body, errors } = compose();
      if (errors.length) {
        show(errors);
        return;
      }
      const ticket = ++asked;
      try {
        const answer = await api("/jobs/validate", { method: "POST", body, headers: keyHeader() });
        if (ticket === asked) show(answer.errors || []);
      } catch (error) {
        if (ticket === asked) show(error.fieldErrors().length ? error.fieldErrors() : [{ field: "", message: error.message }]);
      }
    }, CHECK_AFTER_MS);
  }

  async function submit(event) {
    event.preventDefault();
    clearTimeout(timer);
    const { body, errors } = compose();
    if (errors.length) {
      show(errors);
      return;
    }
    try {
      const made = await api("/jobs", { method: "POST", body, headers: keyHeader() });
      navigate(`#/jobs/${made.job_id}`);
    } catch (error) {
      const named = error.fieldErrors();
      show(named.length ? named : []);
      if (!named.length) general.replaceChildren(notice("error", error.message));
    }
  }

  function keyHeader() {
    const key = idempotencyKey.value.trim();
    return key ? { "Idempotency-Key": key } : {};
  }

  for (const control of [steps, compensate, inputs, options, delay, name, idempotencyKey]) {
    control.addEventListener("input", check);
  }
  for (const control of [priority, version]) control.addEventListener("change", check);

  async function loadVersions() {
    version.replaceChildren(h("option", { value: "" }, "latest"));
    if (!workflow.value) return;
    try {
      const latest = await api(`/workflows/${encodeURIComponent(workflow.value)}`);
      for (const v of [...(latest.versions || [latest.version])].reverse()) {
        version.append(h("option", { value: String(v) }, `version ${v}`));
      }
    } catch {
      // The list shows "latest" only; submitting still works.
    }
  }
  workflow.addEventListener("change", async () => { await loadVersions(); check(); });

  (async () => {
    try {
      const schema = await api("/workflow.schema.json");
      const actions = actionsOf(schema);
      if (actions.length) {
        actionsHint.textContent = `A list of steps. Actions: ${actions.join(", ")}. A step that `
          + "must happen once (pays, submits) may carry \"irreversible\": true and a read-only "
          + "\"check\": [steps]; {{job.id}} gives a reference the site can keep.";
      }
    } catch {
      actionsHint.textContent = "A list of steps.";
    }
    try {
      const list = await api("/workflows");
      for (const w of list.workflows) workflow.append(h("option", { value: w.name }, w.name));
      if (preset) {
        const [presetName, presetVersion] = preset.split("@");
        workflow.value = presetName;
        await loadVersions();
        if (presetVersion) version.value = presetVersion;
      }
    } catch (error) {
      general.append(notice("error", `Workflows could not be listed: ${error.message}`));
    }
    check();
  })();
}
