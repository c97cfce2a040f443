"""A 403 from S3 for a saved session: missing only when a listing of that key says so.

S3 answers a missing key 403 to a caller it does not let list the key. Read blindly as
"never saved", a 403 would also hide a real refusal (another tenant's key, a key policy):
the job would run logged out. So a 403 is confirmed by listing exactly that key.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from pagefleet.tenancy.sessions import SessionArchive, session_key

NOW = 1_700_000_000.0


def _refused(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, operation)


class RefusingS3:
    """GetObject and HeadObject answer 403; the listing answers as told."""

    def __init__(self, listed: list[str] | None) -> None:
        self.listed = listed  # None: the listing is refused too
        self.listings: list[str] = []

    def get_object(self, **_: Any) -> Any:
        raise _refused("GetObject")

    def head_object(self, **_: Any) -> Any:
        raise _refused("HeadObject")

    def list_objects_v2(self, *, Bucket: str, Prefix: str, MaxKeys: int) -> Any:
        self.listings.append(Prefix)
        if self.listed is None:
            raise _refused("ListObjectsV2")
        return {"Contents": [{"Key": k} for k in self.listed if k.startswith(Prefix)]}


def test_a_403_for_a_key_the_listing_shows_absent_is_a_missing_session() -> None:
    s3 = RefusingS3(listed=[])
    archive = SessionArchive(s3, "bucket")  # type: ignore[arg-type]
    assert archive.load("a", "login", now=NOW) is None
    assert archive.info("a", "login") is None
    assert s3.listings == [session_key("a", "login")] * 2


def test_a_403_for_a_key_that_exists_stays_a_refusal() -> None:
    archive = SessionArchive(RefusingS3(listed=[session_key("a", "login")]), "bucket")  # type: ignore[arg-type]
    with pytest.raises(ClientError):
        archive.load("a", "login", now=NOW)


def test_a_403_whose_listing_is_refused_too_stays_a_refusal() -> None:
    archive = SessionArchive(RefusingS3(listed=None), "bucket")  # type: ignore[arg-type]
    with pytest.raises(ClientError):
        archive.load("a", "login", now=NOW)
    with pytest.raises(ClientError):
        archive.info("a", "login")
