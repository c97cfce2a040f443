"""Each shared mechanism has one home, and a second copy fails here rather than drifting
apart in review: how a DynamoDB refusal is read, how long to wait before trying again."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("pagefleet", "functions", "browser_task", "devstack")


def _sources() -> list[Path]:
    return [p for top in CODE for p in sorted((ROOT / top).rglob("*.py"))]


def test_only_the_dynamodb_codec_reads_a_refused_condition() -> None:
    home = ROOT / "pagefleet" / "adapters" / "dynamodb" / "codec.py"
    # The embedded AWS's rule that answers a transaction as AWS does writes the refusal.
    answers = ROOT / "devstack" / "ongoing_transactions.py"
    readers = [
        p.relative_to(ROOT).as_posix()
        for p in _sources()
        if p not in (home, answers)
        and any(
            code in p.read_text()
            for code in ("ConditionalCheckFailed", "TransactionCanceledException")
        )
    ]
    assert readers == [], f"read a refusal with codec.condition_failed instead: {readers}"


def _doubles(path: Path) -> bool:
    """``x * 2 ** n`` in the code (not its docs): an exponential backoff of its own."""
    return any(
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and isinstance(node.right, ast.BinOp)
        and isinstance(node.right.op, ast.Pow)
        and isinstance(node.right.left, ast.Constant)
        and node.right.left.value == 2
        for node in ast.walk(ast.parse(path.read_text()))
    )


def test_only_the_backoff_module_doubles_a_wait() -> None:
    home = ROOT / "pagefleet" / "backoff.py"
    own = [p.relative_to(ROOT).as_posix() for p in _sources() if p != home and _doubles(p)]
    assert own == [], f"wait with a pagefleet.backoff.Backoff instead: {own}"
