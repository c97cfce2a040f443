"""``python -m browser_task``: run a worker until SIGTERM / SIGINT, then drain and exit 0."""

from __future__ import annotations

import asyncio
import signal
import sys

from pydantic import ValidationError

from browser_task.telemetry import logger
from browser_task.worker import Worker


def main() -> int:
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs.settings import WorkerSettings

    try:
        settings = WorkerSettings()
    except ValidationError as exc:
        problems = "\n".join(
            f"  PAGEFLEET_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        print(f"browser_task: invalid settings\n{problems}", file=sys.stderr)
        return 2
    worker = Worker(settings, RUNTIME.job_services(settings))
    try:
        asyncio.run(_serve(worker))
    except Exception:
        logger.exception("worker failed")
        return 1
    return 0


async def _serve(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.run()


if __name__ == "__main__":
    sys.exit(main())
