"""Egress: the URL guard, the filtering proxy and its wire, refusals logged, the breaker gate."""
