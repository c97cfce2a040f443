// Sign in with an API key; the key is checked against the API before it is kept.

import { api, signIn } from "../lib/api.js";
import { field, h, notice } from "../lib/dom.js";

export function signInView(main, { params, navigate }) {
  const input = h("input", {
    id: "api-key",
    name: "api-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const message = h("div", { class: "messages" });
  if (params.get("expired")) {
    message.append(notice("error", "Your API key is no longer accepted. Sign in again."));
  }
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "signin",
      onsubmit: async (event) => {
        event.preventDefault();
        const key = input.value.trim();
        message.replaceChildren();
        if (!key) {
          message.append(notice("error", "Enter your API key."));
          return;
        }
        button.disabled = true;
        try {
          await api("/tenant", { key });
          signIn(key);
          // A link opened signed out (a notification's) goes on where it pointed.
          const asked = window.location.hash;
          navigate(asked && !asked.startsWith("#/signin") ? asked : "#/jobs");
        } catch (error) {
          const refused = error.status === 401 || error.status === 403;
          message.append(
            notice(
              "error",
              refused
                ? "That API key was not accepted. Check it (it starts with pf_) and try again."
                : `Signing in failed: ${error.message}`,
            ),
          );
          input.focus();
        } finally {
          button.disabled = false;
        }
      },
    },
    h("h1", {}, "Sign in to pagefleet"),
    field("API key", input, {
      hint: "Kept in this tab only, until you sign out or close it.",
    }),
    button,
    message,
  );
  main.append(form);
  input.focus();
}
