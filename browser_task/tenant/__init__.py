"""A job's tenant data: credentials scoped to its tenant, saved logins, artifact uploads."""
