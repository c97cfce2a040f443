"""A local Lambda service: functions as pools of execution environments (child processes).

``service`` is the side the local stack uses (``LambdaFunction``); ``runtime`` runs inside
each environment (``python -m devstack.lambda_env module:function --fd N``); ``protocol`` is
what they say to each other and the errors an invocation can end with.
"""

from devstack.lambda_env.protocol import (
    FunctionError,
    InvokeError,
    InvokeTimeout,
    LambdaContext,
    PayloadTooLarge,
    RuntimeExitError,
)
from devstack.lambda_env.service import (
    ExecutionEnvironment,
    FunctionClosed,
    Invoke,
    LambdaFunction,
    invoker,
)

__all__ = [
    "ExecutionEnvironment",
    "FunctionClosed",
    "FunctionError",
    "Invoke",
    "InvokeError",
    "InvokeTimeout",
    "LambdaContext",
    "LambdaFunction",
    "PayloadTooLarge",
    "RuntimeExitError",
    "invoker",
]
