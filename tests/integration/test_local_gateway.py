"""The local gateway over real HTTP on loopback, with handlers in execution environments
(child processes) as the local stack runs them: framing errors are answered like API
Gateway's front end, slow invocations never hold up others, broken environments are
replaced."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from devstack.gateway import LambdaFunction, LocalGateway, RestApi
from devstack.loopback import reserve_loopback_port
from tests.support.lambda_handlers import handler as echo_handler

HANDLER = "tests.support.lambda_handlers:handler"
REPO = Path(__file__).resolve().parents[2]


def _serve(
    function: LambdaFunction, *, read_timeout_s: float = 30, headers_timeout_s: float = 10
) -> LocalGateway:
    api = RestApi(handler=function, authorizer=None)
    return LocalGateway(
        [api], port=0, read_timeout_s=read_timeout_s, headers_timeout_s=headers_timeout_s
    ).start()


@pytest.fixture
def pooled(tmp_path: Path) -> Iterator[tuple[LambdaFunction, LocalGateway]]:
    function = LambdaFunction(
        "test-fn", HANDLER, timeout_s=60, max_concurrency=3, log_dir=tmp_path, env=os.environ
    )
    gateway = _serve(function)
    try:
        yield function, gateway
    finally:
        gateway.stop()
        function.close()


@pytest.fixture
def in_process() -> Iterator[LocalGateway]:
    gateway = _serve(
        LambdaFunction("echo", echo_handler), read_timeout_s=0.5, headers_timeout_s=0.5
    )
    try:
        yield gateway
    finally:
        gateway.stop()


def _raw(gateway: LocalGateway, data: bytes) -> tuple[int, dict[str, str], Any, bool]:
    """Send bytes as they are; the status, headers, JSON body, and whether the server
    closed the connection afterwards."""
    with socket.create_connection((gateway.host, gateway.port), timeout=30) as sock:
        sock.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed without an answer: {received!r}"
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk
            rest += chunk
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
    return int(lines[0].split()[1]), headers, json.loads(rest[:length]), closed


# --- what API Gateway's front end answers ------------------------------------------------------
@pytest.mark.parametrize("length", ["abc", "-1", "1, 2", "+5", ""])
def test_malformed_content_length_is_a_400_json_answer(
    in_process: LocalGateway, length: str, capfd: pytest.CaptureFixture[str]
) -> None:
    request = f"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n{{}}"
    status, headers, body, closed = _raw(in_process, request.encode())
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert "Content-Length" in body["error"]["message"]
    assert headers["connection"] == "close" and closed
    assert "Traceback" not in capfd.readouterr().err


def test_body_shorter_than_announced_is_timed_out_with_408(in_process: LocalGateway) -> None:
    request = b'POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":'
    status, headers, body, closed = _raw(in_process, request)
    assert status == 408
    assert body == {"error": {"code": "bad_request", "message": "Request Timeout"}}
    assert headers["connection"] == "close" and closed


@pytest.mark.parametrize(
    "start", [b"GET /v1/echo HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"GET /v1/echo?slow="]
)
def test_headers_sent_a_byte_at_a_time_are_cut_off_with_408(start: bytes) -> None:
    """Issue 23: each byte restarted the read timeout, so a head trickling in one byte at a
    time kept its connection (and thread) forever. The head now has one deadline."""
    # The read timeout is far longer than the loop below could ever run: only the head's
    # deadline can end it.
    gateway = _serve(
        LambdaFunction("echo", echo_handler), read_timeout_s=120, headers_timeout_s=0.3
    )
    received = b""
    try:
        with socket.create_connection((gateway.host, gateway.port), timeout=30) as sock:
            sock.sendall(start)
            for _ in range(600):  # a generous bound: 600 bytes, one each 50 ms
                readable, _, _ = select.select([sock], [], [], 0.05)
                if readable:
                    break
                try:
                    sock.sendall(b"a")
                except OSError:
                    break  # closed under us: what follows reads the answer
            while chunk := sock.recv(65536):
                received += chunk
    finally:
        gateway.stop()
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), received
    assert b"Connection: close" in head
    assert json.loads(body) == {"error": {"code": "bad_request", "message": "Request Timeout"}}


@pytest.mark.parametrize(
    "line",
    [
        b"\x16\x03\x01\x02\x00\x01\x00 GARBAGE-4711\r\n\r\n",  # a TLS hello, say
        b"GET /v1/echo HTTP/9.9-GARBAGE-4711\r\n\r\n",
        b"GET /v1/GARBAGE-4711\r\n\r\n",  # HTTP/0.9: no version at all
        b"GARBAGE-4711 GARBAGE-4711 GARBAGE-4711 GARBAGE-4711\r\n\r\n",
    ],
)
def test_a_garbage_request_line_is_a_proper_400_that_echoes_nothing(
    in_process: LocalGateway, line: bytes
) -> None:
    status, headers, body, closed = _raw(in_process, line)
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert body == {"error": {"code": "bad_request", "message": "Bad Request"}}
    assert headers["connection"] == "close" and closed


def test_an_idle_connection_is_closed_without_an_answer(in_process: LocalGateway) -> None:
    with socket.create_connection((in_process.host, in_process.port), timeout=30) as sock:
        assert sock.recv(1) == b""  # the read timeout (0.5 s here) ends it, silently


def test_chunked_body_reaches_the_handler_whole(in_process: LocalGateway) -> None:
    request = (
        b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"a"\r\n3;ext=1\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n'
    )
    status, headers, body, _ = _raw(in_process, request)
    assert status == 200
    assert json.loads(body["body"]) == {"a": 1}
    assert "connection" not in headers  # a well-framed request may keep its connection


def test_both_content_length_and_chunked_is_refused(in_process: LocalGateway) -> None:
    request = (
        b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    status, headers, _, closed = _raw(in_process, request)
    assert status == 400 and headers["connection"] == "close" and closed


def test_keep_alive_connection_serves_several_requests(in_process: LocalGateway) -> None:
    with httpx.Client(base_url=f"{in_process.url}/v1", trust_env=False) as http:
        answers = [http.post("/echo", content=f'{{"n":{n}}}') for n in range(3)]
    assert [json.loads(a.json()["body"])["n"] for a in answers] == [0, 1, 2]


def test_a_held_port_cannot_be_taken_and_is_served_as_it_is() -> None:
    """The stack names its ports in settings before serving them; held, nothing else gets
    them in between (CI once lost the WebSocket API's port that way)."""
    held = reserve_loopback_port()
    port = held.getsockname()[1]
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(("127.0.0.1", port))
    api = RestApi(handler=LambdaFunction("echo", echo_handler), authorizer=None)
    gateway = LocalGateway([api], sock=held).start()
    try:
        assert gateway.port == port
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", trust_env=False) as http:
            answer = http.post("/echo", content='{"n": 1}')
        assert json.loads(answer.json()["body"]) == {"n": 1}
    finally:
        gateway.stop()


# --- execution environments -------------------------------------------------------------------
def test_slow_invocation_does_not_hold_up_other_requests(
    pooled: tuple[LambdaFunction, LocalGateway], tmp_path: Path
) -> None:
    _, gateway = pooled
    started, release = tmp_path / "started", tmp_path / "release"
    with (
        httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http,
        ThreadPoolExecutor(1) as background,
    ):
        slow = background.submit(
            http.get, "/wait", params={"started": str(started), "release": str(release)}
        )
        _wait_for(started)
        fast = http.get("/echo")
        # The fast request was answered while the slow one is still inside its handler.
        assert fast.status_code == 200
        assert not slow.done()
        release.touch()
        answer = slow.result(timeout=120)
    assert answer.status_code == 200 and answer.json()["released"] is True
    assert fast.json()["pid"] != answer.json()["pid"]  # two environments, one at a time each
    assert fast.json()["function"] == "test-fn"


def test_warm_environment_is_reused(pooled: tuple[LambdaFunction, LocalGateway]) -> None:
    function, gateway = pooled
    with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
        pids = {http.get("/echo").json()["pid"] for _ in range(5)}
    assert len(pids) == 1
    assert function.cold_starts == 1


def test_crashed_environment_is_answered_502_and_replaced(
    pooled: tuple[LambdaFunction, LocalGateway],
) -> None:
    function, gateway = pooled
    with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
        before = http.get("/echo").json()["pid"]
        crashed = http.get("/crash")
        after = http.get("/echo")
    assert crashed.status_code == 502
    assert crashed.json() == {
        "error": {"code": "internal_error", "message": "Internal server error"}
    }
    assert after.status_code == 200
    assert after.json()["pid"] != before
    assert function.environments == 1


def test_handler_error_is_502_and_its_environment_lives_on(
    pooled: tuple[LambdaFunction, LocalGateway],
) -> None:
    function, gateway = pooled
    with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
        before = http.get("/echo").json()["pid"]
        failed = http.get("/raise")
        after = http.get("/echo").json()["pid"]
    assert failed.status_code == 502
    assert before == after
    assert "RuntimeError: handler failed" in function.log_path.read_text()


def test_invocation_over_its_timeout_is_504_and_its_environment_killed(tmp_path: Path) -> None:
    function = LambdaFunction("slow-fn", HANDLER, timeout_s=1, log_dir=tmp_path, env=os.environ)
    function.prewarm(1)  # the timeout is about the invocation, not the cold start
    gateway = _serve(function)
    pidfile = tmp_path / "pid"
    try:
        with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
            timed_out = http.get("/hang", params={"pidfile": str(pidfile)})
            hung_pid = int(pidfile.read_text())
            after = http.get("/echo")
    finally:
        gateway.stop()
        function.close()
    assert timed_out.status_code == 504
    assert timed_out.json() == {
        "error": {"code": "timed_out", "message": "Endpoint request timed out"}
    }
    assert after.status_code == 200 and after.json()["pid"] != hung_pid
    with pytest.raises(ProcessLookupError):
        os.kill(hung_pid, 0)


def test_a_cold_start_does_not_count_against_the_invocation_timeout(tmp_path: Path) -> None:
    # On Lambda the init phase has its own limit; only the handler's run meets the timeout.
    env = {**os.environ, "SLOW_INIT_S": "3"}
    function = LambdaFunction(
        "slow-init",
        "tests.support.slow_init_handler:handler",
        timeout_s=2,
        log_dir=tmp_path,
        env=env,
    )
    try:
        answer = function.invoke(_get("/"))
    finally:
        function.close()
    assert answer == {"statusCode": 200, "body": "warm"}


def test_closing_a_function_stops_its_environments(tmp_path: Path) -> None:
    function = LambdaFunction("fn", HANDLER, max_concurrency=2, log_dir=tmp_path, env=os.environ)
    function.prewarm(2)
    pids = {function.invoke(_get("/echo"))["body"] for _ in range(2)}
    assert function.environments == 2
    function.close()
    for body in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(json.loads(body)["pid"], 0)


def _get(path: str) -> dict[str, Any]:
    return {"path": path, "httpMethod": "GET", "body": None, "isBase64Encoded": False}


def _wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_environments_die_with_a_killed_parent(tmp_path: Path) -> None:
    """A stack killed with SIGKILL leaves no execution environment behind."""
    script = (
        "import os, sys, time\n"
        "from devstack.lambda_env import LambdaFunction\n"
        f"fn = LambdaFunction('orphan', {HANDLER!r}, env=os.environ)\n"
        "fn.prewarm(1)\n"
        "print(fn.processes()[0].pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.is_running()
    finally:
        parent.kill()
        parent.wait(30)
    gone, _ = psutil.wait_procs([child], timeout=30)
    assert gone == [child]


def test_event_over_lambdas_payload_limit_is_413_before_any_invocation(
    pooled: tuple[LambdaFunction, LocalGateway],
) -> None:
    """API Gateway takes up to 10 MB, Lambda's invoke only 6 MB: nothing runs."""
    function, gateway = pooled
    with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
        response = http.post("/echo", content=b"x" * (7 * 1024 * 1024))
    assert response.status_code == 413
    assert function.cold_starts == 0


def test_an_environment_looks_like_lambdas_to_the_sdks_it_runs(
    pooled: tuple[LambdaFunction, LocalGateway],
) -> None:
    # LAMBDA_TASK_ROOT, as Lambda sets it: the X-Ray SDK takes its Lambda path at import (its
    # other path builds two botocore clients for sampling rules in every cold start), and
    # Powertools' Tracer is told off explicitly (no X-Ray daemon here).
    _, gateway = pooled
    with httpx.Client(base_url=f"{gateway.url}/v1", trust_env=False, timeout=120) as http:
        answer = http.get("/xray").json()
    assert answer == {"sampler": "LocalSampler", "tracing": False, "task_root": str(REPO)}
