"""The environment that points every boto3 client at the embedded AWS, and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping

from devstack.constants import LOCAL_REGION


def aws_env(endpoint_url: str) -> dict[str, str]:
    """Point every boto3 client at moto with dummy credentials; nothing can reach AWS."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_REGION": LOCAL_REGION,
        # No profile or config file may add a real endpoint or credentials.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


# Variables that could send a client somewhere else than moto.
_SCRUBBED = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SECURITY_TOKEN")


def scrubbed(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The variables of ``environ`` to remove (None): profiles, tokens, per-service endpoints."""
    services = [name for name in environ if name.startswith("AWS_ENDPOINT_URL_")]
    return {name: None for name in (*_SCRUBBED, *services)}
