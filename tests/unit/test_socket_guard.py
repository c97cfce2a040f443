"""Unit tests cannot open a socket: pytest-socket fails the test (tests/support/suites.py).

Nothing here sends a packet: the guard refuses before a socket exists, and the check that
integration tests still may use loopback only binds a listening socket in a child pytest.
"""

from __future__ import annotations

import asyncio
import socket
import textwrap
from pathlib import Path

import httpx
import pytest
from pytest_socket import SocketBlockedError

from tests.support.child_pytest import run_child_pytest

# pytest-socket warns as it refuses; here the refusal is what is expected.
pytestmark = pytest.mark.filterwarnings("ignore:A test tried to use socket")


def test_a_unit_test_cannot_open_a_socket_or_look_a_name_up() -> None:
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with pytest.raises(SocketBlockedError):
        socket.create_connection(("127.0.0.1", 9))
    with pytest.raises(SocketBlockedError):
        socket.getaddrinfo("localhost", 80)
    with pytest.raises(SocketBlockedError):
        httpx.get("http://127.0.0.1:9/")


def test_asyncio_still_runs_on_its_unix_socket_pair() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(answer()) == 42


def test_a_unit_test_that_opens_a_socket_fails_and_an_integration_test_may(
    tmp_path: Path,
) -> None:
    """The same test, run by pytest in a child process under tests/unit and under
    tests/integration of a copy of this layout: it fails in the first, passes in the second."""
    opens_a_socket = textwrap.dedent(
        """
        import socket

        def test_listens_on_loopback():
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                sock.listen()
        """
    )
    for suite in ("unit", "integration"):
        (tmp_path / "tests" / suite).mkdir(parents=True)
        (tmp_path / "tests" / suite / f"test_{suite}_socket.py").write_text(opens_a_socket)
    (tmp_path / "tests" / "conftest.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            import pytest

            from tests.support.suites import mark_suites

            @pytest.hookimpl(tryfirst=True)
            def pytest_collection_modifyitems(config, items):
                mark_suites(items, Path(__file__).parent)
            """
        )
    )
    run = run_child_pytest(tmp_path, "--allow-unix-socket")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "FAILED tests/unit/test_unit_socket.py::test_listens_on_loopback" in out, out
    assert "SocketBlockedError" in out, out
    assert "PASSED tests/integration/test_integration_socket.py::test_listens_on_loopback" in out
