"""Artifacts bucket: private, TLS only, encrypted, lifecycle by retention class.

Artifacts carry the object tag ``retention`` (routine | debug); one expiration rule per
class comes from ``pagefleet.specs.resources.ARTIFACTS_BUCKET``, so debug artifacts outlive
routine ones and the local stack applies the same rules.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge
from pagefleet.specs.resources import ARTIFACTS_BUCKET


class ArtifactsBucket(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain: bool,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        spec = ARTIFACTS_BUCKET
        rules = [
            s3.LifecycleRule(
                id="abort-incomplete-uploads",
                abort_incomplete_multipart_upload_after=Duration.days(
                    spec.abort_incomplete_upload_days
                ),
            )
        ]
        rules += [
            s3.LifecycleRule(
                id=f"expire-{rule.retention_class}",
                tag_filters={spec.retention_tag: rule.retention_class},
                expiration=Duration.days(rule.expire_days),
            )
            for rule in spec.lifecycle
        ]
        # Clients fetch artifacts through presigned URLs by plain navigation/download; no
        # browser page reads them cross-origin, so CORS stays off unless origins are given.
        cors = (
            [
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.GET, s3.HttpMethods.HEAD],
                    allowed_origins=list(cors_origins),
                    max_age=3600,
                )
            ]
            if cors_origins
            else None
        )
        self.bucket = s3.Bucket(
            self,
            spec.logical_id,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=rules,
            cors=cors,
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
            # In dev, emptying the bucket lets `cdk destroy` finish.
            auto_delete_objects=not retain,
        )
        acknowledge(
            self.bucket,
            "S1",
            "Artifacts are written by the workers' role and read through short presigned URLs "
            "issued after a tenant check (logged by the API); object-level audit, when needed, "
            "is CloudTrail S3 data events rather than a second bucket of access logs.",
        )
