# pagefleet: the two commands a new user needs are `make run` and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Newer jsii names the end-of-life warning for Node 20 this way.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run demo test test-fast test-e2e lint typecheck fmt synth deploy-check bench chaos clean deps chromium ffmpeg bwrap

## Run the platform on the embedded local stack and watch the example jobs succeed.
run: deps chromium ffmpeg
	.venv/bin/pagefleet local up

## Run the examples once and exit 0 only if every job succeeded (what CI-like checks use).
demo: deps chromium ffmpeg
	.venv/bin/pagefleet demo

## The full truth: lint, type check, every test suite (unit, integration, e2e, infra).
test: deps chromium ffmpeg bwrap lint typecheck
	.venv/bin/pytest

## The quick loop: everything but the suites marked slow.
test-fast: deps lint
	.venv/bin/pytest -m "not slow"

## Only the suites that run the local stack with real Chromium.
test-e2e: deps chromium ffmpeg
	.venv/bin/pytest -m e2e

lint: deps
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports

typecheck: deps
	.venv/bin/mypy pagefleet functions browser_task devstack infra bench scripts

fmt: deps
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

## Synthesize the CDK app to cdk.out/ offline (no Docker, no AWS credentials).
synth: deps
	rm -rf cdk.out
	$(PY) -m infra.app

## Before `cdk deploy`: every stage synthesized offline with cdk-nag and cfn-lint, the
## Dockerfile linted, and the worker run the way its task definition runs it (bubblewrap:
## read-only root, non-root, no capabilities, only the task's volumes writable) through a
## real job against the embedded AWS. Needs root for bubblewrap's mounts.
DEPLOY_CHECK_OUT := cdk.out/deploy-check
deploy-check: deps chromium ffmpeg bwrap
	rm -rf $(DEPLOY_CHECK_OUT)
	$(PY) scripts/synth_check.py --outdir $(DEPLOY_CHECK_OUT)
	.venv/bin/hadolint browser_task/Dockerfile
	$(PY) scripts/worker_smoke.py --template $(DEPLOY_CHECK_OUT)/prod/pagefleet-prod.template.json

## Benchmarks: each runs a baseline and our code side by side and prints the ratio / figures.
bench: deps chromium
	$(PY) bench/e2e_throughput.py

chaos: deps chromium
	$(PY) bench/chaos.py

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

clean:
	rm -rf .venv .tools cdk.out .pytest_cache .mypy_cache .ruff_cache
