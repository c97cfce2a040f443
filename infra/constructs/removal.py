"""What a stage that keeps no data (dev) takes with it on ``cdk destroy``.

CDK keeps a log group and a KMS key when their stack is deleted unless told otherwise
(their default removal policy is RETAIN): a dev stage created and destroyed daily would
leave a key (billed monthly until scheduled for deletion) and every log group behind. On a
stage with ``retain_data`` false, this aspect gives every log group and key the DESTROY
policy (a key is then scheduled for deletion, after its pending window). Prod-like stages
keep theirs: logs and the key of an alarm topic outlive a mistaken destroy.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import IConstruct

GOES_WITH_THE_STACK = (logs.CfnLogGroup, kms.CfnKey)


@jsii.implements(IAspect)
class DestroyWithStack:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, GOES_WITH_THE_STACK) and isinstance(node, CfnResource):
            node.apply_removal_policy(RemovalPolicy.DESTROY)
