#!/usr/bin/env bash
# Create .venv with the locked dependencies (uv.lock), installing uv first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v uv >/dev/null 2>&1; then
  UV=uv
elif [ -x .tools/bin/uv ]; then
  UV=.tools/bin/uv
else
  if ! python3 -m venv .tools >/dev/null 2>&1; then
    # Debian ships venv separately.
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf .tools && python3 -m venv .tools
    else
      echo "pagefleet needs python3-venv. Install it with:  sudo apt-get install -y python3-venv" >&2
      exit 1
    fi
  fi
  .tools/bin/pip install -q 'uv==0.13.9'
  UV=.tools/bin/uv
fi

# The machine's own Python (>= 3.11); uv must not try to download one.
# System certificates: registries may sit behind a TLS-inspecting proxy with its own CA.
export UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=.venv UV_SYSTEM_CERTS=1
"$UV" sync --frozen --all-extras --python python3
