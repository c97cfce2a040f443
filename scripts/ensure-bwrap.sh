#!/usr/bin/env bash
# bubblewrap for the worker smoke run (make deploy-check): Debian's, installed as root if missing.
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "bwrap: installing Debian's bubblewrap with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  exit 0
fi
echo "the worker smoke run needs bubblewrap. Install it with:  sudo apt-get install -y bubblewrap" >&2
exit 1
