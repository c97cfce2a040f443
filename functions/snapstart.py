"""What a SnapStart snapshot must not hand to every environment restored from it.

With SnapStart (the API and the authorizer, ``infra/constructs/lambda_factory.py``) Lambda
runs the init once, snapshots the memory, and resumes every new execution environment from
that one snapshot. Whatever the init left in memory is then shared by all of them:

- ``random``'s state: each environment would draw the same jitter (retry backoff, admission
  spreading) in the same order;
- the ULID generator's last id (python-ulid keeps it to increment within a millisecond):
  restored environments minting ids in one millisecond would mint the same one;
- boto3 clients and their session (the handler's ``RUNTIME``): connections opened
  before the snapshot are dead after it, and the credentials resolved then may have
  expired; everything built from them is rebuilt on first use.

``snapshot_restore_py`` is part of Lambda's managed Python runtimes (a dev dependency here,
for the tests); outside Lambda without it there are no snapshots, so nothing to register.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def after_restore(forget_clients: Callable[[], None]) -> None:
    """Make this environment's state its own again (Lambda calls it after each restore)."""
    import ulid

    random.seed()  # from os.urandom: the kernel's entropy differs per environment
    ulid.default_generator = ulid.ULIDGenerator()
    forget_clients()


def register(forget_clients: Callable[[], None]) -> bool:
    """Register the hooks with Lambda's runtime; False where there is none to register with.

    ``forget_clients``: the composition root's ``RUNTIME.reset`` (its clients, and all
    that was built from them, are rebuilt on first use).
    """
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return False
    register_after_restore(after_restore, forget_clients)
    return True
