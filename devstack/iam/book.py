"""The principals of a synthesized template, with their policies resolved to local ARNs.

The input is what ``devstack.iam.synth`` writes after a synth: the template itself and, for
each logical id the local stack has a counterpart of, that counterpart (a table, queue,
bucket, role, function or WebSocket API, by its local name), plus which roles are the
platform's principals (``function/<name>``, ``worker/<pool>``, ``job-role``, ``scheduler``).

Each principal's policies are exactly the template's: the ``AWS::IAM::Policy`` resources
attached to its role, the role's inline ``Policies`` and the ``AWS::IAM::ManagedPolicy``
resources it names. Their CloudFormation intrinsics (``Ref``, ``Fn::GetAtt``, ``Fn::Join``,
``Fn::Sub``, ``Fn::Select``, ``Fn::Split``) are resolved against the local resources; a
reference to something the local stack has no counterpart of (a log group, a cluster)
becomes an ARN that names it and matches no local resource, so what it grants stays
granted to nothing here. An AWS-managed policy (``arn:aws:iam::aws:policy/...``) is not in
the template and cannot be read: a principal with one is refused at load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.iam.calls import Account
from devstack.iam.policy import Policy, PolicyError

# The local WebSocket API's id (devstack.websocket.management checks ManageConnections on it).
LOCAL_WEBSOCKET_API = "local-live"


def access_key(principal: str) -> str:
    """The static access key id a local principal's process signs with."""
    return "pf-" + re.sub(r"[^a-z0-9]+", "-", principal.lower()).strip("-")


@dataclass(frozen=True)
class Principal:
    name: str  # function/api, worker/standard, job-role, scheduler
    role_arn: str
    policies: tuple[Policy, ...]
    trust: Policy | None = None
    tags: Mapping[str, str] = field(default_factory=dict)  # an assumed session's tags

    @property
    def label(self) -> str:
        """The name, with an assumed session's tags: ``job-role (tenant=a)``."""
        tags = ", ".join(f"{k}={v}" for k, v in sorted(self.tags.items()))
        return f"{self.name} ({tags})" if tags else self.name

    @property
    def session_arn(self) -> str:
        """The caller's ARN as AWS names an assumed role in its messages."""
        account = self.role_arn.split(":")[4]
        role = self.role_arn.rpartition("/")[2]
        return f"arn:aws:sts::{account}:assumed-role/{role}/{self.name.replace('/', '-')}"

    def context(self) -> dict[str, Any]:
        """The request context IAM adds for this caller (global condition keys)."""
        out: dict[str, Any] = {
            "aws:PrincipalArn": self.role_arn,
            "aws:PrincipalAccount": self.role_arn.split(":")[4],
            "aws:PrincipalType": "AssumedRole",
            # The SDKs reach AWS over TLS; the local wire is plain HTTP on loopback.
            "aws:SecureTransport": "true",
        }
        for key, value in self.tags.items():
            out[f"aws:PrincipalTag/{key}"] = value
        return out

    def tagged(self, tags: Mapping[str, str]) -> Principal:
        return Principal(self.name, self.role_arn, self.policies, self.trust, dict(tags))


class _Resolver:
    def __init__(self, template: dict[str, Any], local: Mapping[str, Any], account: Account):
        self._resources = template.get("Resources", {})
        self._local = local
        self._account = account

    def _attr(self, logical_id: str, attr: str) -> str:
        found = self._local.get(logical_id)
        acct = self._account
        if found is None:
            kind = self._resources.get(logical_id, {}).get("Type", "unknown")
            return f"arn:aws:unresolved:{acct.region}:{acct.account}:{kind}/{logical_id}/{attr}"
        name = acct.prefix + found["name"]
        kind = found["kind"]
        arns = {
            "table": acct.arn("dynamodb", f"table/{name}"),
            "queue": acct.arn("sqs", name),
            "bucket": f"arn:aws:s3:::{name}",
            "role": acct.arn("iam", f"role/{name}", region=False),
            "function": acct.arn("lambda", f"function:{name}"),
        }
        if attr == "Ref":
            return found["name"] if kind == "websocket-api" else name
        if attr == "StreamArn" and kind == "table":
            return f"{arns['table']}/stream/*"  # the table's stream, whatever its label
        if attr == "QueueName":
            return name
        if kind in arns:
            return arns[kind]
        return f"arn:aws:unresolved:{acct.region}:{acct.account}:{kind}/{name}/{attr}"

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": self._account.region,
            "AWS::AccountId": self._account.account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "pagefleet-local",
        }
        return pseudo[name] if name in pseudo else self._attr(name, "Ref")

    def _sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"  # a literal ${...}: an IAM policy variable
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                logical_id, _, attr = name.partition(".")
                return self._attr(logical_id, attr)
            if name.startswith("AWS::") or name in self._resources or name in self._local:
                return self._ref(name)
            return match.group(0)

        return re.sub(r"\$\{([^}]+)\}", value, text)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self._ref(arg)
            if fn == "Fn::GetAtt":
                logical_id, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self._attr(logical_id, attr)
            if fn == "Fn::Join":
                separator, parts = arg
                return separator.join(str(p) for p in self.resolve(parts))
            if fn == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return self._sub(text, variables)
            if fn == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if fn == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if fn.startswith("Fn::"):
                raise PolicyError(f"{fn} in a policy is not resolved here")
        return {k: self.resolve(v) for k, v in value.items()}


def _role_policies(template: dict[str, Any], role_id: str) -> list[tuple[str, Any]]:
    """(name, document) of every policy the template attaches to the role."""
    resources = template.get("Resources", {})
    role = resources[role_id].get("Properties", {})
    found = [(p.get("PolicyName", "inline"), p["PolicyDocument"]) for p in role.get("Policies", [])]
    for managed in role.get("ManagedPolicyArns", []):
        if isinstance(managed, dict) and "Ref" in managed and managed["Ref"] in resources:
            props = resources[managed["Ref"]].get("Properties", {})
            found.append((managed["Ref"], props["PolicyDocument"]))
        else:
            raise PolicyError(f"role {role_id} has a managed policy not in the template: {managed}")
    for logical_id, resource in resources.items():
        if resource.get("Type") not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        props = resource.get("Properties", {})
        if {"Ref": role_id} in props.get("Roles", []):
            found.append((logical_id, props["PolicyDocument"]))
    return found


@dataclass
class Book:
    """The principals, found by name, access key and role ARN."""

    principals: dict[str, Principal]
    account: Account

    @classmethod
    def from_synth(cls, data: Mapping[str, Any], account: Account) -> Book:
        template = data["template"]
        resolver = _Resolver(template, data["locals"], account)
        principals = {}
        for role_id, name in data["principals"].items():
            role = template["Resources"][role_id]["Properties"]
            policies = tuple(
                Policy.of(resolver.resolve(document), policy_name)
                for policy_name, document in _role_policies(template, role_id)
            )
            trust = Policy.of(resolver.resolve(role["AssumeRolePolicyDocument"]), "trust")
            arn = resolver.resolve({"Fn::GetAtt": [role_id, "Arn"]})
            principals[name] = Principal(name, arn, policies, trust)
        return cls(principals, account)

    @classmethod
    def load(cls, path: Path, account: Account) -> Book:
        return cls.from_synth(json.loads(path.read_text()), account)

    def by_key(self) -> dict[str, Principal]:
        return {access_key(name): p for name, p in self.principals.items()}

    def by_role(self, role_arn: str) -> Principal | None:
        return next((p for p in self.principals.values() if p.role_arn == role_arn), None)
