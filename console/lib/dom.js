// Building the page with DOM calls only: no innerHTML (nothing from the API is ever parsed
// as markup) and no inline styles (the Content-Security-Policy allows neither).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  append(el, children);
  return el;
}

export function table(headers, rows, { caption, className } = {}) {
  return h(
    "table",
    { class: className },
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((title) => h("th", { scope: "col" }, title)))),
    h("tbody", {}, rows),
  );
}

export function field(label, control, { hint, id } = {}) {
  const controlId = id || control.id;
  const error = h("p", { class: "field-error", id: `${controlId}-error`, role: "alert" });
  if (hint) control.setAttribute("aria-describedby", `${controlId}-hint ${controlId}-error`);
  else control.setAttribute("aria-describedby", `${controlId}-error`);
  return h(
    "div",
    { class: "field", dataset: { field: controlId } },
    h("label", { for: controlId }, label),
    control,
    hint ? h("p", { class: "hint", id: `${controlId}-hint` }, hint) : null,
    error,
  );
}

export function setFieldError(container, controlId, message) {
  const error = container.querySelector(`#${CSS.escape(controlId)}-error`);
  const control = container.querySelector(`#${CSS.escape(controlId)}`);
  if (error) error.textContent = message || "";
  if (control) {
    if (message) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  }
}

export function notice(kind, text) {
  return h("p", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}
