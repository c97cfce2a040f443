#!/usr/bin/env bash
# Find a Chromium for the worker, installing Debian's when we can.
# Order: a Playwright-managed Chromium, /usr/bin/chromium, apt-get (as root), else say how.
set -euo pipefail

if compgen -G "${PLAYWRIGHT_BROWSERS_PATH:-$HOME/.cache/ms-playwright}/chromium-*/chrome-linux*/chrome" >/dev/null; then
  echo "chromium: Playwright-managed"
  exit 0
fi
if [ -x /usr/bin/chromium ]; then
  echo "chromium: /usr/bin/chromium"
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "chromium: installing Debian's chromium with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "pagefleet needs Chromium. Install it with:  sudo apt-get install -y chromium" >&2
exit 1
