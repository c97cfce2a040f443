"""The local Lambda service: each function is a pool of execution environments.

An execution environment is a child process (``python -m devstack.lambda_env``) that runs
one invocation at a time and keeps its globals warm between them, as on Lambda. This is
also what makes concurrent invocations safe: Powertools' resolver keeps the current event
on a class attribute, so two threads in one process must never run the API handler at once.

A function starts environments on demand up to ``max_concurrency`` (each start is a cold
start) and reuses idle ones, the most recently used first. Beyond ``max_concurrency`` an
invocation waits for a free environment (Lambda would scale out; one machine cannot) and
that wait counts against its timeout. An invocation that outlives its timeout gets its
environment killed, as Lambda resets an environment after a timeout; an environment that
dies is replaced by the next cold start. ``close()`` stops them all.

A plain callable instead of ``module:function`` runs in the caller's thread (unit-test
fakes and ``tests.support.api``); there is no process, so no timeout is enforced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from devstack.lambda_env.protocol import (
    MAX_PAYLOAD_BYTES,
    FunctionError,
    InvokeTimeout,
    LambdaContext,
    PayloadTooLarge,
    RuntimeExitError,
    recv_frame,
    send_frame,
)
from devstack.processes import ManagedProcess

log = logging.getLogger("devstack")

LambdaHandler = Callable[[dict[str, Any], Any], Any]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Lambda gives init 10 s; a loaded 2-core machine importing boto3 and Powertools in several
# children at once can take longer, and a slow start is not the behaviour under test.
INIT_TIMEOUT_S = 60.0


class FunctionClosed(RuntimeError):
    """The function was closed (the stack is stopping)."""


class ExecutionEnvironment:
    """One child process running one function; used by one invocation at a time."""

    def __init__(self, function: LambdaFunction, index: int) -> None:
        self.function = function
        self.name = f"{function.name}#{index}"
        self.log_stream = f"{time.strftime('%Y/%m/%d')}/[$LATEST]{uuid.uuid4().hex}"
        self._sock: socket.socket | None = None
        self.process: ManagedProcess | None = None
        self.pid: int | None = None

    def start(self, spawn: Callable[[Callable[[], ManagedProcess]], ManagedProcess]) -> None:
        """Start the process (through ``spawn``, on a long-lived thread) and wait for init."""
        ours, theirs = socket.socketpair()
        fn = self.function

        def popen() -> ManagedProcess:
            return ManagedProcess(
                self.name,
                [
                    sys.executable,
                    "-m",
                    "devstack.lambda_env",
                    fn.target,
                    "--fd",
                    str(theirs.fileno()),
                ],
                env={
                    **fn.environment(),
                    "AWS_LAMBDA_LOG_STREAM_NAME": self.log_stream,
                },
                log_path=fn.log_path,
                cwd=fn.cwd,
                pass_fds=(theirs.fileno(),),
            )

        try:
            self.process = spawn(popen)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        try:
            hello = recv_frame(ours, time.monotonic() + fn.init_timeout_s)
        except (EOFError, TimeoutError) as exc:
            self.kill()
            raise RuntimeExitError(f"{self.name} did not start: {self._tail()}") from exc
        if "init_error" in hello:
            self.kill()
            error = hello["init_error"]
            raise FunctionError(str(error.get("errorMessage")), str(error.get("errorType")))
        self.pid = int(hello["ready"])

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def invoke(self, payload: dict[str, Any], deadline: float) -> Any:
        """Send one event, wait for its reply until ``deadline``; kill the environment on
        a timeout or a broken exchange (it cannot be trusted with another event)."""
        assert self._sock is not None
        try:
            send_frame(self._sock, payload, deadline)
            reply = recv_frame(self._sock, deadline)
        except TimeoutError:
            self.kill()
            raise InvokeTimeout(
                f"Task timed out after {self.function.timeout_s:.2f} seconds"
            ) from None
        except (EOFError, OSError):
            self.kill()
            code = self.process.popen.returncode if self.process else None
            raise RuntimeExitError(
                f"RequestId: {payload['context']['request_id']} Error: Runtime exited"
                f" with error: exit status {code}"
            ) from None
        if "error" in reply:
            error = reply["error"]
            raise FunctionError(str(error.get("errorMessage")), str(error.get("errorType")))
        return reply.get("result")

    def kill(self) -> None:
        """Stop at once: SIGKILL to the process group, no grace (a Lambda reset)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.stop(grace_s=0)

    def close(self, grace_s: float = 2.0) -> None:
        """Shut down: closing the socket ends the runtime's loop; stragglers are killed."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.stop(grace_s=grace_s)

    def _tail(self) -> str:
        return self.process.tail() if self.process else ""


class LambdaFunction:
    """One Lambda function: ``invoke(event)`` runs it in a free execution environment."""

    def __init__(
        self,
        name: str,
        target: str | LambdaHandler,
        *,
        timeout_s: float = 29,
        memory_mb: int = 512,
        max_concurrency: int = 4,
        env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        cwd: Path = REPO_ROOT,
        init_timeout_s: float = INIT_TIMEOUT_S,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.name = name
        self.target = target if isinstance(target, str) else getattr(target, "__name__", "fn")
        self._callable = None if isinstance(target, str) else target
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.max_concurrency = max_concurrency
        self._env = dict(env) if env is not None else None
        # One file per function, like its CloudWatch log group; every environment appends.
        self.log_path = log_dir / f"lambda-{name}.log" if log_dir else Path(os.devnull)
        self.cwd = cwd
        self.init_timeout_s = init_timeout_s
        self.cold_starts = 0
        self._cond = threading.Condition()
        self._idle: list[ExecutionEnvironment] = []
        self._live: set[ExecutionEnvironment] = set()
        self._count = 0  # environments running or starting
        self._closed = False
        # Children are started from this one long-lived thread: PR_SET_PDEATHSIG fires when
        # the *thread* that forked a child exits, and request threads are short-lived.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"spawn-{name}")

    # --- configuration ---------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """What the function's processes see: the given env (or ours) plus Lambda's own."""
        env = dict(self._env if self._env is not None else os.environ)
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": self.name,
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.name}",
                "_HANDLER": self.target,
                # Lambda's own: the code's directory. The X-Ray SDK then takes its Lambda
                # path at import, as on AWS (outside Lambda its recorder builds two botocore
                # clients for sampling rules, ~0.15 s of CPU in every environment's start).
                "LAMBDA_TASK_ROOT": str(self.cwd),
                # No X-Ray daemon listens here (Powertools turns its Tracer off for SAM local
                # likewise); on AWS the functions trace.
                "POWERTOOLS_TRACE_DISABLED": "true",
                "PYTHONUNBUFFERED": "1",  # log lines in order with START / END
                "TZ": ":UTC",  # Lambda's own (its reserved variables): local time is UTC
                # No system time zone database, as on a runtime built from a minimal image
                # (the AL2023-based Lambda runtimes): zones come from the tzdata package.
                "PYTHONTZPATH": "",
            }
        )
        return env

    @property
    def environments(self) -> int:
        with self._cond:
            return self._count

    def processes(self) -> list[ManagedProcess]:
        """The processes of the environments alive now (busy or idle)."""
        with self._cond:
            return [e.process for e in self._live if e.process is not None and e.alive()]

    # --- invoking --------------------------------------------------------------------------
    def invoke(self, event: Any, *, timeout_s: float | None = None) -> Any:
        """The handler's result; raises an ``InvokeError`` as Lambda would report one."""
        timeout = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        request_id = str(uuid.uuid4())
        if self._callable is not None:
            return self._invoke_here(event, request_id, timeout)
        deadline = time.monotonic() + timeout
        payload_event = json.dumps(event, separators=(",", ":"))
        if len(payload_event) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(
                f"Request must be smaller than {MAX_PAYLOAD_BYTES} bytes for the Invoke operation"
            )
        env, init_s = self._acquire(deadline)
        # As on Lambda, a cold start's init phase has its own limit (init_timeout_s) and does
        # not count against the invocation's timeout; a wait for a free environment does.
        deadline += init_s
        reusable = False
        try:
            context = LambdaContext(
                self.name,
                request_id=request_id,
                timeout_s=max(0.0, deadline - time.monotonic()),
                memory_mb=self.memory_mb,
                log_stream_name=env.log_stream,
            )
            result = env.invoke({"event": event, "context": context.wire()}, deadline)
            reusable = True
            return result
        except FunctionError:
            reusable = True  # the handler raised; its environment lives on
            raise
        finally:
            self._release(env, reusable)

    def _invoke_here(self, event: Any, request_id: str, timeout: float) -> Any:
        assert self._callable is not None
        context = LambdaContext(self.name, request_id=request_id, timeout_s=timeout)
        try:
            return self._callable(event, context)
        except Exception as exc:
            log.debug("%s raised", self.name, exc_info=True)
            raise FunctionError(str(exc), type(exc).__name__) from exc

    def prewarm(self, count: int = 1) -> None:
        """Start up to ``count`` environments now (in parallel) so that first calls are warm."""
        if self._callable is not None:
            return
        wanted = min(count, self.max_concurrency)
        deadline = time.monotonic() + self.init_timeout_s
        started: list[ExecutionEnvironment] = []
        errors: list[BaseException] = []

        def one() -> None:
            try:
                started.append(self._acquire(deadline)[0])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(wanted)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for env in started:
            self._release(env, True)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Stop every environment; invocations still running end as a runtime exit."""
        with self._cond:
            self._closed = True
            idle, busy = list(self._idle), self._live - set(self._idle)
            self._idle = []
            self._live -= set(idle)
            self._count -= len(idle)
            self._cond.notify_all()
        for env in busy:
            env.kill()
        for env in idle:
            env.close()
        self._spawner.shutdown(wait=True)

    # --- the pool --------------------------------------------------------------------------
    def _acquire(self, deadline: float) -> tuple[ExecutionEnvironment, float]:
        """A warm environment (and 0), or a new one and the seconds its cold start took."""
        with self._cond:
            while True:
                if self._closed:
                    raise FunctionClosed(f"{self.name} is closed")
                while self._idle:
                    env = self._idle.pop()
                    if env.alive():
                        return env, 0.0
                    self._count -= 1  # died while idle (killed from outside): forget it
                    self._live.discard(env)
                if self._count < self.max_concurrency:
                    self._count += 1
                    self.cold_starts += 1
                    index = self.cold_starts
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InvokeTimeout(f"no free environment of {self.name} in time")
                self._cond.wait(remaining)
        env = ExecutionEnvironment(self, index)
        started = time.monotonic()
        try:
            env.start(lambda popen: self._spawner.submit(popen).result())
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._live.add(env)
        log.debug("cold start: %s (pid %s)", env.name, env.pid)
        return env, time.monotonic() - started

    def _release(self, env: ExecutionEnvironment, reusable: bool) -> None:
        with self._cond:
            keep = reusable and not self._closed and env.alive()
            if keep:
                self._idle.append(env)
            else:
                self._count -= 1
                self._live.discard(env)
            self._cond.notify()
        if not keep:
            env.kill()


# A function's invoke: what a local event source calls with each event.
Invoke = Callable[[dict[str, Any]], Any]


def invoker(function: LambdaFunction | Invoke) -> Invoke:
    """``function``'s invoke: a ``LambdaFunction``'s, or a callable as it is (a test's stand-in,
    or an invoke wrapped by ``devstack.repeated_invocations``)."""
    return function.invoke if isinstance(function, LambdaFunction) else function
