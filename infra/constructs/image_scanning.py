"""The worker image is scanned for known vulnerabilities when it is pushed.

``cdk deploy`` pushes the worker image (a ``DockerImageAsset``) to the CDK bootstrap's
container-assets repository (``cdk-<qualifier>-container-assets-<account>-<region>``), which
the bootstrap template creates without scanning, and which this stack does not own. ECR's
registry scanning configuration (``AWS::ECR::RegistryScanningConfiguration``: one per account
and region) decides, by name filter, which repositories are scanned on push, so the stack
sets it with a rule for every repository (``*``): basic scanning is free, and a narrower
filter could stop scanning repositories the account scans today. docs/decisions.md,
"Dependency and image scanning".

``image_scanning`` (stage config) says who owns the setting, as ``api_gateway_account`` does:

- ``"stack"``: this stack sets basic scanning on push for every repository. The setting is the
  account's: the last stack to deploy one wins, so one stage per account and region owns it.
- ``"existing"``: someone else owns it (another stage, a security team's Amazon Inspector
  enhanced scanning, which this basic configuration would replace). Check it before
  deploying: ``aws ecr get-registry-scanning-configuration``.

Findings reach the operator as docs/runbooks.md, "A worker image finding", says.
"""

from __future__ import annotations

from aws_cdk import aws_ecr as ecr
from constructs import Construct

from infra.config import StageConfig

# Every repository: the bootstrap's assets repository whatever its qualifier, and the rest.
SCAN_EVERY_REPOSITORY = "*"


class ImageScanning(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.configuration: ecr.CfnRegistryScanningConfiguration | None = None
        if config.image_scanning != "stack":
            return
        self.configuration = ecr.CfnRegistryScanningConfiguration(
            self,
            "Registry",
            scan_type="BASIC",
            rules=[
                ecr.CfnRegistryScanningConfiguration.ScanningRuleProperty(
                    scan_frequency="SCAN_ON_PUSH",
                    repository_filters=[
                        ecr.CfnRegistryScanningConfiguration.RepositoryFilterProperty(
                            filter=SCAN_EVERY_REPOSITORY, filter_type="WILDCARD"
                        )
                    ],
                )
            ],
        )
