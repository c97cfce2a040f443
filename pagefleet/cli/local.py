"""The local stack commands: ``local up`` and ``demo``.

The only part of ``pagefleet`` that imports ``devstack`` (the CLI is the top of the core,
not its base), and only when one of these commands runs, so the rest of the CLI works
without the local extras installed.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from pagefleet.cli import render
from pagefleet.cli.common import EXIT_FAILED, EXIT_SERVICE, CliError, console

local_app = typer.Typer(help="The local stack (embedded AWS, API, workers, demo site).")

ApiPort = Annotated[int, typer.Option(help="API port on 127.0.0.1 (0 = any free port).")]


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    # Also when started from a shell that ignores SIGINT for background jobs.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _start_stack(api_port: int, workers: int, concurrency: int, site_port: int = 0) -> Any:
    from devstack.stack import LocalStack, StackError  # local extras; +0.28 s to every command

    # Every declared pool runs (one small worker for each beyond the standard pool's).
    stack = LocalStack(
        api_port=api_port,
        workers=workers,
        concurrency=concurrency,
        site_port=site_port,
        every_pool=workers > 0,
    )
    with console.status("starting the local stack…"):
        try:
            stack.start()
        except StackError as exc:
            raise CliError(str(exc), EXIT_SERVICE) from exc
    return stack


@local_app.command("up")
def local_up(
    api_port: ApiPort = 8080,
    workers: Annotated[int, typer.Option(min=0, help="Worker processes.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs per worker at once.")] = 2,
    examples: Annotated[bool, typer.Option("--examples/--no-examples")] = True,
    site_port: Annotated[
        int, typer.Option(help="Demo site port on 127.0.0.1 (0 = any free port).")
    ] = 8081,
) -> None:
    """Start everything on loopback and keep it running until Ctrl-C."""
    from devstack.examples import run_examples  # the local extras (module docstring)

    with _sigterm_as_interrupt():
        stack = _start_stack(api_port, workers, concurrency, site_port)
        try:
            render.print_stack(stack)
            if examples and workers:
                with console.status("running the example workflows…"), stack.client() as client:
                    results = run_examples(client, stack.site_url)
                render.print_examples(results)
            console.print("running; press Ctrl-C to stop")
            while True:
                time.sleep(1)
                dead = stack.dead_children()
                if dead:
                    names = ", ".join(p.name for p in dead)
                    raise CliError(
                        f"{names} exited; last log lines:\n{dead[0].tail()}", EXIT_SERVICE
                    )
        except KeyboardInterrupt:
            console.print("\nstopping…")
        finally:
            _print_iam(stack)
            stack.stop()
            console.print("stopped")


def _print_iam(stack: Any) -> None:
    """What the local IAM check saw: calls checked, and every call it refused."""
    from devstack.iam.local import summary

    if not stack.iam.on:
        return
    report = stack.iam_report()
    for denied in report["denied"]:
        console.print(
            f"  IAM refused {denied['principal']}: {denied['action']} on {denied['resource']}"
        )
    console.print(summary(report))


def demo(
    api_port: ApiPort = 0,
    workers: Annotated[int, typer.Option(min=1)] = 1,
    concurrency: Annotated[int, typer.Option(min=1)] = 2,
) -> None:
    """Start the local stack, run examples/workflows/, check artifacts, stop. Exit 0 if all pass."""
    from devstack.examples import run_examples  # the local extras (module docstring)

    with _sigterm_as_interrupt():
        stack = _start_stack(api_port, workers, concurrency)
        try:
            console.print(f"local stack up: API {stack.api_url}, demo site {stack.site_url}")
            with console.status("running the example workflows…"), stack.client() as client:
                results = run_examples(client, stack.site_url)
            ok = render.print_examples(results)
            if not ok:
                console.print(f"logs: {stack.log_dir}")
        finally:
            stack.stop()
    if not ok:
        raise typer.Exit(EXIT_FAILED)
    stack.cleanup_logs()
