// The live view of a running job or session: its page as the worker's Chromium paints it,
// 1-5 frames a second while this viewer watches (nothing is sent to anyone otherwise).
// A frame comes as JPEG in base64, in up to four messages (each under API Gateway's 32 KB
// WebSocket frame) joined here by `seq`; an older frame never replaces a newer one.
// A notification's console link (`#/jobs/<id>?live=1&takeover=1`) opens the job watching, and
// takes the page over at its first frame when `takeOverNow()` says so (the job waits for a
// person: none of its steps run, so holding the page costs the job nothing); it answers
// null until the job is read, and the next frame asks again.

import { h } from "./dom.js";
import { live } from "./live.js";
import { takeoverControls } from "./takeover.js";

export function liveViewer(jobId, { watchNow = false, takeOverNow = () => false } = {}) {
  const image = h("img", { id: "live-frame", alt: "The job's page, live", hidden: "" });
  const state = h("p", { class: "hint", id: "live-state", role: "status" }, "Not watching.");
  let stopWatching = null;
  let shown = 0;
  let pendingTake = watchNow; // the link's takeover, decided at the first frame
  const parts = new Map(); // seq -> {parts, got: []}
  const takeover = takeoverControls(jobId, image); // "Take over" once a frame is shown

  function onMessage(message) {
    if (message.type === "watching") {
      state.textContent = shown ? "Watching." : "Watching: waiting for the first frame…";
      return;
    }
    if (message.type === "error") {
      state.textContent = `Cannot watch: ${message.message}`;
      stop();
      return;
    }
    if (message.type !== "frame" || message.seq <= shown) return;
    const frame = parts.get(message.seq) || { parts: message.parts, got: [] };
    frame.got[message.part] = message.data;
    parts.set(message.seq, frame);
    if (frame.got.filter((part) => part !== undefined).length < frame.parts) return;
    for (const seq of parts.keys()) if (seq <= message.seq) parts.delete(seq);
    shown = message.seq;
    image.src = `data:image/jpeg;base64,${frame.got.join("")}`;
    image.dataset.seq = String(message.seq);
    image.hidden = false;
    state.textContent = "Watching.";
    takeover.watching(true);
    const take = pendingTake ? takeOverNow() : null; // null: the job is not read yet
    if (take !== null) {
      pendingTake = false;
      if (take) takeover.take();
    }
  }

  function stop() {
    takeover.watching(false); // a page held from here is handed back
    if (stopWatching) stopWatching();
    stopWatching = null;
    button.textContent = "Watch live";
    button.setAttribute("aria-pressed", "false");
  }

  const button = h("button", {
    type: "button", class: "secondary", id: "live-watch", "aria-pressed": "false",
    onclick: () => {
      if (stopWatching) {
        stop();
        state.textContent = "Not watching.";
        return;
      }
      stopWatching = live.watch(jobId, onMessage);
      button.textContent = "Stop watching";
      button.setAttribute("aria-pressed", "true");
      state.textContent = "Connecting…";
    },
  }, "Watch live");

  const element = h("section", { id: "live-view", "aria-labelledby": "live-view-title" },
    h("h2", { id: "live-view-title" }, "Live view"),
    h("div", { class: "actions" }, button), state, takeover.element, image);
  if (watchNow) button.click();
  return { element, stop };
}
