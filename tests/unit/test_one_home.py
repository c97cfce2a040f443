"""Each shared mechanism has one home, and a second copy fails here rather than drifting
apart in review: how a DynamoDB refusal is read."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("pagefleet", "functions", "browser_task", "devstack")


def _sources() -> list[Path]:
    return [p for top in CODE for p in sorted((ROOT / top).rglob("*.py"))]


def test_only_the_dynamodb_codec_reads_a_refused_condition() -> None:
    home = ROOT / "pagefleet" / "adapters" / "dynamodb" / "codec.py"
    readers = [
        p.relative_to(ROOT).as_posix()
        for p in _sources()
        if p != home
        and any(
            code in p.read_text()
            for code in ("ConditionalCheckFailed", "TransactionCanceledException")
        )
    ]
    assert readers == [], f"read a refusal with codec.condition_failed instead: {readers}"
