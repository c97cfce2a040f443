"""The session moto server's state right after provisioning, put back before each test.

Every integration and contract test wants the resources of ``devstack.provision.create_all``
and nothing else: no item, message, object, schedule or resource left by the test before.
Resetting moto and creating the ~45 resources again through boto3 cost ~0.3 s of CPU a test
quiet and ~0.8 s under the suite's load, for ~500 tests. The server runs in the test
process (``tests/conftest.py``), so the state ``create_all`` leaves is kept once, pickled,
and each test gets a copy of its own after moto's own reset (the one ``/moto-api/reset``
makes): the same resources, built by the same calls under the same rules, and nothing of
any earlier test. ``tests/integration/test_moto_state.py`` holds a restored state to a
freshly made one.
"""

from __future__ import annotations

import io
import pickle
import threading
from dataclasses import dataclass
from typing import Any

# moto's queues wait on a Condition (long polls); a copy gets a new one, as does any lock.
_LOCKS: tuple[type, ...] = (type(threading.Lock()), type(threading.RLock()))


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, threading.Condition):
            return threading.Condition, ()
        if isinstance(obj, _LOCKS[0]):
            return threading.Lock, ()
        if isinstance(obj, _LOCKS[1]):
            return threading.RLock, ()
        return NotImplemented


@dataclass(frozen=True)
class MotoState:
    """Every moto backend in use, pickled together (references between them kept)."""

    # (service's BackendDict, account, region) of each backend, in the pickle's order.
    places: tuple[tuple[Any, str, str], ...]
    backends: bytes
    # S3 keeps which account owns each bucket beside its backends.
    bucket_accounts: dict[str, tuple[str, str]]

    @classmethod
    def take(cls) -> MotoState:
        from moto.core.base_backend import BackendDict, backend_lock
        from moto.s3.models import s3_backends

        with backend_lock:
            places, objects = [], []
            for service in BackendDict._instances:  # type: ignore[misc]
                for account, regions in service.items():
                    for region, backend in regions.items():
                        places.append((service, account, region))
                        objects.append(backend)
            buffer = io.BytesIO()
            _Pickler(buffer, pickle.HIGHEST_PROTOCOL).dump(objects)
            return cls(tuple(places), buffer.getvalue(), dict(s3_backends.bucket_accounts))

    def restore(self) -> None:
        """moto reset as ``POST /moto-api/reset`` resets it, then this state's copy in it."""
        from moto.core.base_backend import backend_lock
        from moto.moto_api._internal.models import moto_api_backend
        from moto.s3.models import s3_backends

        with backend_lock:
            moto_api_backend.reset()
            # S301: bytes this process pickled itself (take).
            copies = pickle.loads(self.backends)  # noqa: S301
            for (service, account, region), backend in zip(self.places, copies, strict=True):
                dict.__setitem__(service[account], region, backend)
            s3_backends.bucket_accounts.update(self.bucket_accounts)
