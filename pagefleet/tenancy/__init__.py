"""Tenants as a platform sees them: limits and their enforcement, usage and cost, audit
records, data retention and deletion (see docs/decisions.md, "Tenants")."""
