"""Environment for a runtime, built from its settings model so names cannot drift.

The stack never spells a ``PAGEFLEET_*`` name: it passes field names of the runtime's settings
class, and this module refuses unknown fields and missing required ones at synth time.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings

from pagefleet.specs.settings import env_names


def settings_env(settings_cls: type[BaseSettings], **values: str) -> dict[str, str]:
    """``{PAGEFLEET_FIELD: value}`` for ``settings_cls``; fails on unknown or missing fields."""
    fields = settings_cls.model_fields
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{settings_cls.__name__} has no settings {unknown}")
    missing = sorted(n for n, f in fields.items() if f.is_required() and n not in values)
    if missing:
        raise ValueError(f"{settings_cls.__name__} requires settings {missing}")
    prefix = str(settings_cls.model_config.get("env_prefix", ""))
    env = {f"{prefix}{name}".upper(): value for name, value in values.items()}
    assert set(env) <= env_names(settings_cls)
    return env
