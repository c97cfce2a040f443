// The live WebSocket API: one connection for the tab, opened with a single-use ticket (a
// browser cannot send the key as a header), re-opened with backoff when it drops. Views
// follow a job or every job of the tenant; after a reconnect each follow is sent again, a
// job's with the last event seen so nothing is missed.

import { api, getConfig } from "./api.js";

const PING_EVERY_MS = 60_000;
// A watch lasts 30 s on the server unless sent again (pagefleet/live/watch.py).
const WATCH_EVERY_MS = 10_000;
const BACKOFF_MS = [1000, 2000, 5000, 10000, 30000];

class Live {
  constructor() {
    this.socket = null;
    this.state = "closed"; // closed | connecting | open
    this.follows = new Map(); // room -> {listeners: Set, after: number|null}
    this.watches = new Map(); // job id -> Set of listeners of its live view's messages
    this.watchTimer = null;
    this.stateListeners = new Set();
    this.failures = 0;
    this.timer = null;
    this.pinger = null;
    this.stopped = true;
  }

  onState(listener) {
    this.stateListeners.add(listener);
    listener(this.state);
    return () => this.stateListeners.delete(listener);
  }

  setState(state) {
    this.state = state;
    this.stateListeners.forEach((listener) => listener(state));
  }

  start() {
    this.stopped = false;
    if (this.state === "closed" && this.follows.size) this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    clearInterval(this.watchTimer);
    this.follows.clear();
    this.watches.clear();
    if (this.socket) this.socket.close(1000, "signed out");
    this.socket = null;
    this.setState("closed");
  }

  // Follow a job ({job_id}) or every job ({jobs: "all"}); returns the way to stop.
  follow(target, listener, { after = null } = {}) {
    const room = target.job_id || "all";
    let entry = this.follows.get(room);
    if (!entry) {
      entry = { target, listeners: new Set(), after };
      this.follows.set(room, entry);
      this.send({ action: "subscribe", ...target, ...(after !== null ? { after } : {}) });
    }
    entry.listeners.add(listener);
    if (!this.stopped && this.state === "closed") this.connect();
    return () => {
      entry.listeners.delete(listener);
      if (!entry.listeners.size) {
        this.follows.delete(room);
        this.send({ action: "unsubscribe", ...target });
      }
    };
  }

  // Watch a job's page (its live view): its frames and the server's answers go to
  // `listener` while watched; the watch is sent again every 10 s and after a reconnect.
  watch(jobId, listener) {
    let listeners = this.watches.get(jobId);
    if (!listeners) {
      listeners = new Set();
      this.watches.set(jobId, listeners);
      this.send({ action: "watch", job_id: jobId });
    }
    listeners.add(listener);
    if (!this.watchTimer) {
      this.watchTimer = setInterval(() => {
        for (const id of this.watches.keys()) this.send({ action: "watch", job_id: id });
      }, WATCH_EVERY_MS);
    }
    if (!this.stopped && this.state === "closed") this.connect();
    return () => {
      listeners.delete(listener);
      if (listeners.size) return;
      this.watches.delete(jobId);
      this.send({ action: "unwatch", job_id: jobId });
      if (!this.watches.size) {
        clearInterval(this.watchTimer);
        this.watchTimer = null;
      }
    };
  }

  send(message) {
    if (this.socket && this.state === "open") this.socket.send(JSON.stringify(message));
  }

  async connect() {
    if (this.stopped || this.state !== "closed") return;
    this.setState("connecting");
    let ticket;
    try {
      ticket = await api("/live/tickets", { method: "POST" });
    } catch {
      this.retry();
      return;
    }
    // The API names the live URL with the ticket; config.json names it too, as a fallback.
    const base = getConfig().websocket_url;
    const url = ticket && (ticket.url || (base && `${base}?ticket=${encodeURIComponent(ticket.ticket)}`));
    if (!url || this.stopped) {
      this.setState("closed");
      return;
    }
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.failures = 0;
      this.setState("open");
      for (const entry of this.follows.values()) {
        const after = entry.after !== null ? { after: entry.after } : {};
        socket.send(JSON.stringify({ action: "subscribe", ...entry.target, ...after }));
      }
      for (const id of this.watches.keys()) socket.send(JSON.stringify({ action: "watch", job_id: id }));
      clearInterval(this.pinger);
      this.pinger = setInterval(() => this.send({ action: "ping" }), PING_EVERY_MS);
    });
    socket.addEventListener("message", (event) => this.receive(event.data));
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      clearInterval(this.pinger);
      this.socket = null;
      this.setState("closed");
      if (!this.stopped && (this.follows.size || this.watches.size)) this.retry();
    });
  }

  retry() {
    this.setState("closed");
    const delay = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)];
    this.failures += 1;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  receive(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    const messages = message.type === "batch" ? message.messages || [] : [message];
    for (const one of messages) this.dispatch(one);
  }

  dispatch(message) {
    if (message.type === "subscribed" && message.jobs === "all") {
      // Following every job from now on: what changed before is for the view to read.
      const all = this.follows.get("all");
      if (all) all.listeners.forEach((listener) => listener(message));
      return;
    }
    if (!message.job_id) return;
    const watchers = this.watches.get(message.job_id);
    if (watchers && ["frame", "watching", "error"].includes(message.type)) {
      watchers.forEach((listener) => listener(message));
      if (message.type !== "error") return;
    }
    const job = this.follows.get(message.job_id);
    if (job && message.type === "events" && message.next_after !== undefined) {
      job.after = message.next_after;
    }
    const rooms = [job, message.type === "status" ? this.follows.get("all") : null];
    for (const entry of rooms) {
      if (entry) entry.listeners.forEach((listener) => listener(message));
    }
  }
}

export const live = new Live();
