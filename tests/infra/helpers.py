"""Small lookups shared by the infra tests."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnElement, Stack
from constructs import IConstruct


def logical_id(construct: IConstruct) -> str:
    child = construct.node.default_child if not isinstance(construct, CfnElement) else construct
    assert isinstance(child, CfnElement)
    stack = Stack.of(child)
    return str(stack.resolve(stack.get_logical_id(child)))


def ref(construct: IConstruct) -> dict[str, str]:
    return {"Ref": logical_id(construct)}


def statements(policy_props: dict[str, Any]) -> list[dict[str, Any]]:
    return list(policy_props["PolicyDocument"]["Statement"])


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
