// The REST API, on the console's own origin (no CORS): the key is sent as a Bearer token and
// kept in sessionStorage, for this tab only; it is never put in a URL or a cookie.

const KEY = "pagefleet.apiKey";
let config = { api_base: "/v1", websocket_url: null, stage: "" };

export async function loadConfig() {
  try {
    const response = await fetch("./config.json", { cache: "no-store" });
    if (response.ok) config = { ...config, ...(await response.json()) };
  } catch {
    // Served without a config (a plain file server): the API is at /v1 on this origin.
  }
  return config;
}

export function getConfig() {
  return config;
}

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || (body && body.message) || `the API answered ${status}`);
    this.status = status;
    this.code = error.code || null;
    this.field = error.field || null;
    this.details = Array.isArray(error.details) ? error.details : [];
    this.retryAfter = null;
  }

  // Every field error the answer names: [{field, message}].
  fieldErrors() {
    const named = this.details.filter((d) => d && d.field);
    if (named.length) return named.map((d) => ({ field: d.field, message: d.message || this.message }));
    return this.field ? [{ field: this.field, message: this.message }] : [];
  }
}

// Listeners told when the key stops working (revoked, or a wrong key): the app signs out.
const unauthorized = new Set();
export function onUnauthorized(listener) {
  unauthorized.add(listener);
}

export async function api(path, { method = "GET", body, query, signal, key, headers: extra } = {}) {
  const url = new URL(config.api_base + path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const headers = { ...(extra || {}), Accept: "application/json" };
  const token = key || apiKey();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "omit",
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, { message: "The API cannot be reached. Check your connection." });
  }
  const text = await response.text();
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    payload = { message: text };
  }
  if (!response.ok) {
    const error = new ApiError(response.status, payload);
    error.retryAfter = response.headers.get("Retry-After");
    if ((response.status === 401 || response.status === 403) && !key && !error.code) {
      // API Gateway's own 401/403 (no code): the key itself is refused.
      unauthorized.forEach((listener) => listener(error));
    }
    throw error;
  }
  return payload;
}
