"""Entry point of one execution environment (see ``devstack.lambda_env.runtime``)."""

from devstack.lambda_env.runtime import main

raise SystemExit(main())
