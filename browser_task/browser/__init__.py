"""The browser: one Chromium per generation, contexts, warm contexts, traces and video."""
