"""``python -m browser_task`` fails fast, and clearly, on invalid settings."""

from __future__ import annotations

from browser_task.__main__ import main


def test_invalid_settings_exit_with_a_clear_message(monkeypatch, capsys):
    for name in ("PAGEFLEET_JOBS_TABLE", "PAGEFLEET_QUEUE_URLS", "PAGEFLEET_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAGEFLEET_TENANTS_TABLE", "t")
    monkeypatch.setenv("PAGEFLEET_ARTIFACTS_BUCKET", "b")
    monkeypatch.setenv("PAGEFLEET_CONCURRENCY", "0")

    assert main() == 2
    err = capsys.readouterr().err
    assert "invalid settings" in err
    assert "PAGEFLEET_JOBS_TABLE" in err
    assert "PAGEFLEET_CONCURRENCY" in err
