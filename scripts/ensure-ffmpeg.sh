#!/usr/bin/env bash
# An ffmpeg where Playwright looks for it, so jobs can record video (options.video).
#
# Playwright records with the ffmpeg of its own registry:
#   ${PLAYWRIGHT_BROWSERS_PATH:-~/.cache/ms-playwright}/ffmpeg-<revision>/ffmpeg-linux
# (the revision is in the driver's browsers.json). `playwright install` downloads it, which
# a machine without the download host cannot do; Debian's ffmpeg does the same job (VP9
# encoder, Matroska demuxer), so it is linked there. Order: Playwright's own build, a
# Debian ffmpeg, apt-get (as root), else say how. The worker image has Playwright's build.
set -euo pipefail
cd "$(dirname "$0")/.."

target=$(.venv/bin/python -c 'from browser_task.browser.video import ffmpeg_path; print(ffmpeg_path())')
if [ -x "$target" ]; then
  echo "ffmpeg: $target"
  exit 0
fi
if ! command -v ffmpeg >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "ffmpeg: installing Debian's ffmpeg with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
  else
    echo "video recording needs ffmpeg. Install it with:  sudo apt-get install -y ffmpeg" >&2
    echo "then run:  make ffmpeg" >&2
    exit 1
  fi
fi
mkdir -p "$(dirname "$target")"
ln -sf "$(command -v ffmpeg)" "$target"
echo "ffmpeg: $target -> $(command -v ffmpeg)"
