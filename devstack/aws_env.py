"""The environment that points the local stack's AWS clients at the embedded AWS (moto),
with dummy credentials, and a free loopback port for its servers."""

from __future__ import annotations

import os
import socket

from devstack.constants import LOCAL_REGION

__all__ = ["SCRUBBED", "aws_env", "free_port"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


# Variables that could send a client somewhere else than moto; removed from our env.
SCRUBBED = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SECURITY_TOKEN")
