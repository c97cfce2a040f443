"""Tenants and API keys: create, list, rotate, revoke (the admin commands call these)."""

from __future__ import annotations

import hashlib
import secrets

from pagefleet import ids
from pagefleet.errors import InvalidRequest, Unauthorized
from pagefleet.jobs.models import iso, utcnow
from pagefleet.jobs.ports import ApiKeyRecord, TenantStore

KEY_PREFIX = "pf_"


def hash_api_key(api_key: str) -> str:
    # Keys are 256-bit random tokens: a plain SHA-256 is enough (no dictionary to guard).
    return hashlib.sha256(api_key.encode()).hexdigest()


def create_api_key(
    store: TenantStore, tenant_id: str, *, name: str = "default", admin: bool = False
) -> tuple[str, ApiKeyRecord]:
    """Return the plaintext key (shown once) and its record; only the hash is stored."""
    if not ids.is_tenant_id(tenant_id):
        # str.isalnum() took any script's letters and digits, of any length: such a tenant
        # was made, then its jobs failed on AWS, whose role session names and secret names
        # are ASCII and whose session tags end at 256 characters (docs/decisions.md).
        raise InvalidRequest(
            "tenant id must be 1 to 128 ASCII letters, digits, '-' or '_'", field="tenant"
        )
    plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=secrets.token_hex(6),
        tenant_id=tenant_id,
        name=name,
        created_at=iso(utcnow()),
        revoked=False,
        admin=admin,
    )
    store.put_key(record, hash_api_key(plaintext))
    return plaintext, record


def authenticate(store: TenantStore, api_key: str) -> ApiKeyRecord:
    """The tenant behind a key; a missing, unknown or revoked key is Unauthorized."""
    if not api_key:
        raise Unauthorized("missing API key")
    record = store.find_key(hash_api_key(api_key))
    if record is None or record.revoked:
        raise Unauthorized("unknown or revoked API key")
    return record


def revoke_key(store: TenantStore, tenant_id: str, key_id: str) -> None:
    for key_hash, record in store.keys_of(tenant_id):
        if record.key_id == key_id:
            store.revoke(key_hash)
            return
    raise InvalidRequest(f"tenant {tenant_id} has no key {key_id}", field="key_id")


def rotate_key(store: TenantStore, tenant_id: str, key_id: str) -> tuple[str, ApiKeyRecord]:
    """Issue a new key with the old one's name and rights, then revoke the old one."""
    for key_hash, record in store.keys_of(tenant_id):
        if record.key_id == key_id:
            plaintext, new = create_api_key(store, tenant_id, name=record.name, admin=record.admin)
            store.revoke(key_hash)
            return plaintext, new
    raise InvalidRequest(f"tenant {tenant_id} has no key {key_id}", field="key_id")
