"""Observability: structured logs and metrics, run events, usage, liveness, task protection."""
