"""Identity of the embedded AWS: moto's default account, one region."""

LOCAL_REGION = "us-east-1"
LOCAL_ACCOUNT = "123456789012"
