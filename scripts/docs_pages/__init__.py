"""The reference pages' renderers (scripts/docs_reference.py writes them)."""
