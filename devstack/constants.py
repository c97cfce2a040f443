"""Identity of the embedded AWS (moto's default account, one region), and the environment
that points boto3 at it."""

import os

from pagefleet.adapters.client_config import VALIDATE_PARAMETERS_ENV

LOCAL_REGION = "us-east-1"
LOCAL_ACCOUNT = "123456789012"


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
        # botocore checks each request against the service model before it leaves, as
        # deployed code leaves to AWS (pagefleet.adapters.client_config): the embedded AWS
        # accepts requests AWS refuses, so locally the client refuses them.
        VALIDATE_PARAMETERS_ENV: "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
