"""The sites jobs reach: which addresses pagefleet may send traffic to (the egress policy,
SSRF), and which origins are failing (the circuit breakers)."""
