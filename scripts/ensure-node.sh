#!/usr/bin/env bash
# Node.js for the CDK app: aws-cdk-lib is a jsii library, whose Python calls run in a node
# process, so every synth (make synth, deploy-check, the infra tests in make test) needs it.
# Order: a node on PATH, Debian's nodejs through apt-get (as root), else say how.
set -euo pipefail

if command -v node >/dev/null 2>&1; then
  echo "node: $(command -v node) $(node --version)"
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "node: installing Debian's nodejs with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs >/dev/null
  command -v node >/dev/null 2>&1 && exit 0
  echo "apt-get installed nodejs but no node is on PATH" >&2
  exit 1
fi
echo "the CDK synths need Node.js. Install it with:  sudo apt-get install -y nodejs" >&2
exit 1
