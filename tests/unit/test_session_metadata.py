"""A saved session's expiry is read whatever case its metadata names come back in (S3
answers them in lower case; they are HTTP headers, and other servers capitalize them)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pagefleet.tenancy.sessions import SessionArchive


class OneObject:
    def __init__(self, metadata: dict[str, str]) -> None:
        self.metadata = metadata

    def get_object(self, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(b'{"cookies": []}'), "Metadata": self.metadata}

    def head_object(self, **_: Any) -> dict[str, Any]:
        return {"ContentLength": 15, "Metadata": self.metadata}


@pytest.mark.parametrize("names", [("saved-at", "expires-at"), ("Saved-At", "Expires-At")])
def test_an_expired_session_is_never_loaded(names: tuple[str, str]) -> None:
    saved, expires = names
    archive = SessionArchive(OneObject({saved: "100", expires: "200"}), "b")  # type: ignore[arg-type]
    assert archive.load("t", "shop", now=150) == {"cookies": []}
    assert archive.load("t", "shop", now=200) is None
    info = archive.info("t", "shop")
    assert info is not None and (info.saved_at, info.expires_at) == (100, 200)
