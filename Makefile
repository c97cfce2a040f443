# pagefleet: the two commands a new user needs are `make run` and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Newer jsii names the end-of-life warning for Node 20 this way.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# The Node.js scripts/ensure-node.sh installs when the machine has none new enough (Debian
# 12's is 18): first on PATH for every target, so the synths' jsii runs on it.
export PATH := $(CURDIR)/.tools/node/bin:$(PATH)
# Python keeps the bytecode it compiles, whatever the caller's environment says: a test run
# starts hundreds of Python processes (the local stacks' functions and workers, the CLI's
# calls, pytest's workers), and with PYTHONDONTWRITEBYTECODE set each compiled every module
# it imports from source again (a fifth of a local stack's start; pytest's workers
# rewrote every test module's asserts each). .pyc files are ignored by git.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: audit run demo test test-fast test-e2e lint typecheck fmt synth deploy-check bench chaos clean deps chromium ffmpeg bwrap ensure-node docs

## Run the platform on the embedded local stack and watch the example jobs succeed.
run: deps chromium ffmpeg
	.venv/bin/pagefleet local up

## Run the examples once and exit 0 only if every job succeeded (what CI-like checks use).
demo: deps chromium ffmpeg
	.venv/bin/pagefleet demo

## Tests run on three pytest-xdist workers on the machine's two cores: much of a test's time
## is spent waiting on a browser, a server or a queue (on two workers CI kept 63 % of the
## cores busy and took 27.5 min; on three, 23 min). Tests that share a module's local stack,
## or the infra synths, stay on one worker (tests/support/suites.py).
XDIST := -n 3 --dist loadgroup

## The full truth: lint, type check, every test suite (unit, contract, integration, e2e,
## worker, infra, chaos).
test: deps chromium ffmpeg bwrap ensure-node lint typecheck audit
	.venv/bin/pytest $(XDIST) --durations=25

## The quick loop: unit and contract tests, and a slice of the others (tests/support/suites.py).
test-fast: deps ensure-node lint
	.venv/bin/pytest $(XDIST) -m "not slow"

## Only the suites that run the local stack with real Chromium.
test-e2e: deps chromium ffmpeg
	.venv/bin/pytest $(XDIST) -m e2e

## The locked dependencies (uv.lock) against PyPI's advisory data; accepted findings, each
## with its reason and review date, in security/accepted-findings.toml (scripts/audit.py).
## Lookups are cached a day (.cache/audit/); PyPI not answering within 60 s ends it saying
## which packages went unchecked (exit 2), unless the cache holds them from the last week.
audit: deps
	$(PY) scripts/audit.py

lint: deps
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports

typecheck: deps
	.venv/bin/mypy pagefleet functions browser_task devstack infra bench scripts

fmt: deps
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

## The docs site: the reference pages written again from the code (docs/reference/), then
## the site built strictly into site/ (a broken link or a page left out fails). make test
## checks both (tests/unit/test_docs_reference.py, tests/unit/test_docs_site.py).
docs: deps ensure-node
	$(PY) scripts/docs_reference.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

## Synthesize the CDK app to cdk.out/ offline (no Docker, no AWS credentials).
synth: deps ensure-node
	rm -rf cdk.out
	$(PY) -m infra.app -c pagefleet:inspectOnly=true

## Before `cdk deploy`: every stage synthesized offline with cdk-nag and cfn-lint, each
## stage's quota needs (Fargate vCPU, Lambda concurrency; read from the account with
## QUOTAS=aws), the
## Dockerfile linted, the template rules (tests/infra/test_template_rules.py), the worker
## run the way its task definition runs it (bubblewrap: read-only root, non-root, no
## capabilities, only the task's volumes writable) through a real job against the embedded
## AWS, then the local stack driven through what the platform does and probed across
## tenants, every AWS call checked against the synthesized template's IAM policies (its last
## lines: calls checked and denied, probes denied).
## Needs root for bubblewrap's mounts.
DEPLOY_CHECK_OUT := cdk.out/deploy-check
deploy-check: deps chromium ffmpeg bwrap ensure-node
	rm -rf $(DEPLOY_CHECK_OUT)
	$(PY) scripts/synth_check.py --outdir $(DEPLOY_CHECK_OUT)
	$(PY) scripts/quota_check.py $(if $(filter aws,$(QUOTAS)),--aws)
	.venv/bin/hadolint browser_task/Dockerfile
	.venv/bin/pytest -q -p no:cacheprovider tests/infra/test_template_rules.py
	$(PY) scripts/worker_smoke.py --template $(DEPLOY_CHECK_OUT)/prod/pagefleet-prod.template.json \
		--iam-report $(DEPLOY_CHECK_OUT)/iam-smoke.json
	$(PY) scripts/iam_check.py --merge $(DEPLOY_CHECK_OUT)/iam-smoke.json

## Benchmarks: each runs a baseline and our code side by side and prints the ratio / figures.
bench: deps chromium
	$(PY) bench/e2e_throughput.py

# The chaos run at the platform's size: 2,000 jobs with interactive sessions, as four parts
# of 500 on a fresh stack each (~15 min a part), each recorded as it ends; run it again the
# same day to go on from the first part not recorded. CHAOS_ARGS to vary.
CHAOS_RECORD ?= bench/results/chaos-$(shell date -u +%Y%m%d).jsonl
CHAOS_ARGS ?= --jobs 2000 --workers 4 --parts 4
chaos: deps chromium
	$(PY) bench/chaos.py $(CHAOS_ARGS) --record $(CHAOS_RECORD) --resume

deps: .venv/.synced

.venv/.synced: pyproject.toml uv.lock scripts/bootstrap.sh
	scripts/bootstrap.sh
	@touch $@

chromium:
	@scripts/ensure-chromium.sh

## Video recording (options.video): Playwright's ffmpeg, or Debian's linked where it looks.
ffmpeg: deps
	@scripts/ensure-ffmpeg.sh

## bubblewrap runs the worker as Fargate would (the smoke test in make test, deploy-check);
## without root to install it, the smoke test says so and is skipped.
bwrap:
	@scripts/ensure-bwrap.sh || true

## Node.js runs the CDK library behind every synth (make synth, deploy-check, the infra tests).
ensure-node:
	@scripts/ensure-node.sh

clean:
	rm -rf .venv .tools cdk.out site .pytest_cache .mypy_cache .ruff_cache
