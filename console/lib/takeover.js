// Take over the page shown in the live view: while this tab holds it, the job's steps wait,
// and what the person does on the frame (pointer moves, presses, keys, typing, scrolling)
// goes to the page as input events, in order, one batch at a time (docs/api.md, "Take over a
// page"). Presses go as the browser saw them (down/up with the DOM's click count), so the
// page gets a person's double click as a real one and hover menus open under the pointer;
// moves are kept to the latest one in a batch. The
// page goes back with "Hand back", or by itself after the takeover's idle time without
// input (the API's takeover_idle_s). Coordinates are the frame's own pixels (the image's
// natural size); the worker scales them to the page's viewport.

import { api } from "./api.js";
import { h } from "./dom.js";

const SEND_EVERY_MS = 100;
// A batch of pointer moves only goes at most this often (a hover needs the last position,
// not every pixel on the way).
const MOVES_EVERY_MS = 300;
const MAX_BATCH = 50;
const BUTTONS = ["left", "middle", "right"]; // MouseEvent.button 0, 1, 2

function modifiers(event) {
  const out = [];
  if (event.altKey) out.push("Alt");
  if (event.ctrlKey) out.push("Control");
  if (event.metaKey) out.push("Meta");
  if (event.shiftKey) out.push("Shift");
  return out;
}

function clock(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleTimeString();
}

// `image`: the live view's <img>.
export function takeoverControls(jobId, image) {
  let held = null; // the takeover this tab holds
  let queue = [];
  let sending = false;
  let timer = null;
  let lastSent = 0;

  const state = h("p", { class: "hint", id: "takeover-state", role: "status" }, "");
  const take = h("button", { type: "button", id: "takeover-take", disabled: "" }, "Take over");
  const back = h("button", { type: "button", class: "secondary", id: "takeover-back", hidden: "" }, "Hand back");

  function show() {
    take.hidden = !!held;
    back.hidden = !held;
    image.classList.toggle("taken-over", !!held);
    image.tabIndex = held ? 0 : -1;
    state.textContent = held
      ? `You hold the page until ${clock(held.until)} (it goes back after ${held.idle_s} s without input). The job's steps wait.`
      : "";
  }

  function released(text) {
    held = null;
    queue = [];
    clearInterval(timer);
    timer = null;
    show();
    if (text) state.textContent = text;
  }

  async function flush() {
    if (!held || sending || !queue.length || !image.naturalWidth) return;
    const movesOnly = queue.every((event) => event.type === "move");
    if (movesOnly && Date.now() - lastSent < MOVES_EVERY_MS) return;
    lastSent = Date.now();
    sending = true;
    const events = queue.slice(0, MAX_BATCH);
    queue = queue.slice(events.length);
    try {
      const answer = await api(`/jobs/${jobId}/takeover/input`, {
        method: "POST",
        body: {
          takeover_id: held.takeover_id,
          frame: { width: image.naturalWidth, height: image.naturalHeight },
          events,
        },
      });
      if (held) held = answer.takeover;
      show();
    } catch (error) {
      if (error.code === "takeover_not_held") released("The page went back to the job (handed back, or no input for its idle time).");
      else state.textContent = `Input not sent: ${error.message}`;
    } finally {
      sending = false;
    }
  }

  function push(event) {
    if (!held) return;
    const last = queue[queue.length - 1];
    if (event.type === "move" && last && last.type === "move") {
      queue[queue.length - 1] = event; // only where the pointer is now
      return;
    }
    if (event.type === "text" && last && last.type === "text" && !last.modifiers.length) {
      last.text += event.text; // typing goes as one text event per batch
      return;
    }
    queue.push(event);
  }

  function at(event) {
    const box = image.getBoundingClientRect();
    const x = ((event.clientX - box.left) / box.width) * image.naturalWidth;
    const y = ((event.clientY - box.top) / box.height) * image.naturalHeight;
    return {
      x: Math.max(0, Math.min(image.naturalWidth, x)),
      y: Math.max(0, Math.min(image.naturalHeight, y)),
    };
  }

  function heldButtons(event) {
    return BUTTONS.filter((_, i) => event.buttons & [1, 4, 2][i]); // MouseEvent.buttons bits
  }
  function press(type) {
    return (event) => {
      if (!held || !BUTTONS[event.button]) return;
      event.preventDefault(); // no drag of the image itself, no text selection around it
      if (type === "down") image.focus();
      // detail: the DOM's click count (2 on a double click's second press).
      push({ type, ...at(event), button: BUTTONS[event.button],
        count: Math.min(3, Math.max(1, event.detail || 1)), modifiers: modifiers(event) });
    };
  }
  image.addEventListener("mousedown", press("down"));
  image.addEventListener("mouseup", press("up"));
  image.addEventListener("mousemove", (event) => {
    if (!held) return;
    push({ type: "move", ...at(event), buttons: heldButtons(event), modifiers: modifiers(event) });
  });
  image.addEventListener("dragstart", (event) => event.preventDefault());
  image.addEventListener("contextmenu", (event) => {
    if (held) event.preventDefault(); // the right button went as down/up: no menu here
  });
  image.addEventListener("wheel", (event) => {
    if (!held) return;
    event.preventDefault();
    push({ type: "scroll", ...at(event), dx: event.deltaX, dy: event.deltaY, modifiers: modifiers(event) });
  }, { passive: false });
  image.addEventListener("keydown", (event) => {
    if (!held) return;
    event.preventDefault();
    const shortcut = event.ctrlKey || event.metaKey || event.altKey;
    if (event.key.length === 1 && !shortcut) push({ type: "text", text: event.key, modifiers: [] });
    else if (!["Shift", "Control", "Alt", "Meta"].includes(event.key)) {
      push({ type: "key", key: event.key.slice(0, 32), modifiers: modifiers(event) });
    }
  });

  take.addEventListener("click", async () => {
    if (held) return;
    try {
      const answer = await api(`/jobs/${jobId}/takeover`, { method: "POST" });
      held = answer.takeover;
      timer = setInterval(flush, SEND_EVERY_MS);
      show();
      image.focus();
    } catch (error) {
      state.textContent = `Cannot take over: ${error.message}`;
    }
  });
  back.addEventListener("click", async () => {
    if (!held) return;
    const id = held.takeover_id;
    // What the person did lands before the page goes back: every batch sent, in order.
    while (held && (queue.length || sending)) {
      if (!sending) await flush();
      else await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (!held) return;
    try {
      await api(`/jobs/${jobId}/takeover`, { method: "DELETE", query: { takeover_id: id } });
      released("Handed back: the job goes on.");
    } catch (error) {
      if (error.code === "takeover_not_held") released("The page had gone back to the job already.");
      else state.textContent = `Hand back failed: ${error.message}`;
    }
  });

  return {
    element: h("div", { class: "takeover" }, h("div", { class: "actions" }, take, back), state),
    take() {
      if (!take.disabled && !held) take.click();
    },
    // Watching: a frame to act on exists; not watching: nothing to take over from.
    watching(on) {
      take.disabled = !on;
      if (!on && held) back.click();
    },
  };
}
