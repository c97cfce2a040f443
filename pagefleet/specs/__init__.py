"""What the runtimes and the CDK app (infra/) share, defined once: the data resources, the
settings and their environment variables, the metric names, the console site, the tenants'
default limits. Pure Python, no AWS calls: infra imports only this package (and what it
imports) from the core."""
