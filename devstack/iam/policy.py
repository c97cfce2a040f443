"""IAM policy evaluation, as AWS documents it, for what pagefleet's policies use.

AWS's order (the "policy evaluation logic" page): an explicit ``Deny`` in any applicable
policy wins; otherwise an ``Allow`` in any of them allows; otherwise the request is denied
implicitly. A statement applies when its action, resource (and, for resource and trust
policies, principal) match and every condition holds.

Covered: ``Action``/``NotAction``, ``Resource``/``NotResource`` with ``*`` and ``?``
wildcards (actions case-insensitive, resources case-sensitive), ``Principal`` (``*``, ARNs,
account ids and account roots, services), policy variables (``${aws:PrincipalTag/tenant}``
and any other key of the request, ``${*}``/``${?}``/``${$}``), and the condition operators
String*, Arn*, Bool and Null, each optionally ``...IfExists``, with the ``ForAllValues:`` and
``ForAnyValue:`` set qualifiers. Condition key names are case-insensitive. A policy that
uses anything else (an unknown operator, ``NotPrincipal``) is refused when it is loaded:
a check that silently ignored a condition would allow what AWS refuses.

Compiled once per policy document (``Policy.of`` caches by the document's JSON); a request
costs a few regular-expression matches per statement.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ContextValue = str | tuple[str, ...]


class Decision(enum.Enum):
    ALLOW = "allow"
    EXPLICIT_DENY = "explicit deny"
    IMPLICIT_DENY = "implicit deny"


class PolicyError(ValueError):
    """The policy uses something this evaluator does not evaluate."""


@dataclass(frozen=True)
class Request:
    """One authorization question: may ``principal`` do ``action`` on ``resource``?

    ``context`` holds the condition keys (any case) with their values; a key's tuple value
    is multi-valued (``aws:TagKeys``, ``dynamodb:LeadingKeys``).
    """

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    principal: str = ""  # the caller's ARN (resource and trust policies match on it)

    def __post_init__(self) -> None:
        # Condition key names are case-insensitive: kept in lower case once.
        lowered = {k.lower(): v for k, v in self.context.items()}
        object.__setattr__(self, "context", lowered)

    def key(self, name: str) -> tuple[str, ...] | None:
        value = self.context.get(name.lower())
        if value is None:
            return None
        return value if isinstance(value, tuple) else (value,)


_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_ESCAPES = {"*": "\x00", "?": "\x01", "$": "$"}  # ${*} and ${?} are literal characters


def substitute(text: str, request: Request) -> str | None:
    """``text`` with its policy variables replaced; None when one is missing (AWS then
    treats the element as matching nothing)."""
    if "${" not in text:
        return text
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1)
        if name in _ESCAPES:
            return _ESCAPES[name]
        found = request.key(name)
        if found is None or len(found) != 1:
            missing = True
            return ""
        return found[0]

    out = _VARIABLE.sub(value, text)
    return None if missing else out


@functools.lru_cache(maxsize=4096)
def _wildcard(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char == "\x00":
            parts.append(re.escape("*"))
        elif char == "\x01":
            parts.append(re.escape("?"))
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def like(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    return _wildcard(pattern, ignore_case).fullmatch(value) is not None


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


# --- conditions ------------------------------------------------------------------------------
def _literal(p: str) -> str:
    return p.replace("\x00", "*").replace("\x01", "?")


def _string_equals(p: str, v: str) -> bool:
    return _literal(p) == v


def _string_equals_ic(p: str, v: str) -> bool:
    return _literal(p).lower() == v.lower()


def _arn_like(p: str, v: str) -> bool:
    # ARNs compare part by part; a wildcard never crosses into the next part.
    pattern_parts, value_parts = p.split(":", 5), v.split(":", 5)
    if len(pattern_parts) != 6 or len(value_parts) != 6:
        return False
    return all(like(a, b) for a, b in zip(pattern_parts, value_parts, strict=True))


def _bool(p: str, v: str) -> bool:
    return p.lower() == v.lower()


# operator -> (compare(policy value, request value), negated)
_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "stringequals": (_string_equals, False),
    "stringnotequals": (_string_equals, True),
    "stringequalsignorecase": (_string_equals_ic, False),
    "stringnotequalsignorecase": (_string_equals_ic, True),
    "stringlike": (like, False),
    "stringnotlike": (like, True),
    "arnequals": (_arn_like, False),
    "arnlike": (_arn_like, False),
    "arnnotequals": (_arn_like, True),
    "arnnotlike": (_arn_like, True),
    "bool": (_bool, False),
}


@dataclass(frozen=True)
class Condition:
    operator: str  # lower case, without qualifier or IfExists
    qualifier: str  # "", "forallvalues" or "foranyvalue"
    if_exists: bool
    key: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, operator: str, key: str, values: Any) -> Condition:
        qualifier, _, name = operator.rpartition(":")
        qualifier = qualifier.lower()
        if qualifier not in ("", "forallvalues", "foranyvalue"):
            raise PolicyError(f"unknown condition qualifier {qualifier!r}")
        name = name.lower()
        if_exists = name.endswith("ifexists")
        name = name.removesuffix("ifexists")
        if name not in _OPERATORS and name != "null":
            raise PolicyError(f"condition operator {operator!r} is not evaluated here")
        return cls(name, qualifier, if_exists, key, tuple(str(v) for v in _as_list(values)))

    def holds(self, request: Request) -> bool:
        found = request.key(self.key)
        if self.operator == "null":
            return (found is None) == (self.values[0].lower() == "true")
        if found is None or not found:
            if self.qualifier == "forallvalues":
                return True  # vacuously: no value fails (AWS's documented pitfall)
            if self.if_exists:
                return True
            # A missing key matches no value: positive operators fail, negated ones hold.
            return _OPERATORS[self.operator][1] and self.qualifier != "foranyvalue"
        compare, negated = _OPERATORS[self.operator]
        patterns = [substitute(p, request) for p in self.values]

        def matches(value: str) -> bool:
            hit = any(p is not None and compare(p, value) for p in patterns)
            return not hit if negated else hit

        if self.qualifier == "forallvalues":
            return all(matches(v) for v in found)
        return any(matches(v) for v in found)


# --- statements and policies -----------------------------------------------------------------
def _principal_matches(spec: Any, caller: str) -> bool:
    if spec == "*":
        return True
    if not isinstance(spec, dict):
        raise PolicyError(f"unreadable Principal {spec!r}")
    for kind, values in spec.items():
        for value in _as_list(values):
            if value == "*" or value == caller:
                return True
            # An account (id or root ARN) stands for every principal in it.
            account = value.isdigit() or value.endswith(":root")
            if kind == "AWS" and account and _account_of(value) == _account_of(caller):
                return True
    return False


def _account_of(arn_or_id: str) -> str:
    if arn_or_id.isdigit():
        return arn_or_id
    parts = arn_or_id.split(":")
    return parts[4] if len(parts) > 5 else ""


@dataclass(frozen=True)
class Statement:
    allow: bool
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_resources: tuple[str, ...]
    conditions: tuple[Condition, ...]
    principal: Any = None  # None: an identity policy's statement
    sid: str = ""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Statement:
        if "NotPrincipal" in raw:
            raise PolicyError("NotPrincipal is not evaluated here")
        effect = raw.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise PolicyError(f"Effect must be Allow or Deny, not {effect!r}")
        conditions = tuple(
            Condition.parse(op, key, values)
            for op, block in (raw.get("Condition") or {}).items()
            for key, values in block.items()
        )
        return cls(
            allow=effect == "Allow",
            actions=tuple(_as_list(raw.get("Action", []))),
            not_actions=tuple(_as_list(raw.get("NotAction", []))),
            resources=tuple(_as_list(raw.get("Resource", []))),
            not_resources=tuple(_as_list(raw.get("NotResource", []))),
            conditions=conditions,
            principal=raw.get("Principal"),
            sid=str(raw.get("Sid", "")),
        )

    def _action_matches(self, action: str) -> bool:
        if self.not_actions:
            return not any(like(a, action, ignore_case=True) for a in self.not_actions)
        return any(like(a, action, ignore_case=True) for a in self.actions)

    def _resource_matches(self, request: Request) -> bool:
        def hit(patterns: Iterable[str]) -> bool:
            for pattern in patterns:
                resolved = substitute(pattern, request)
                if resolved is not None and like(resolved, request.resource):
                    return True
            return False

        if self.not_resources:
            return not hit(self.not_resources)
        if not self.resources:
            return True  # a trust policy's statement names no resource
        return hit(self.resources)

    def applies(self, request: Request) -> bool:
        if not self._action_matches(request.action):
            return False
        if self.principal is not None and not _principal_matches(self.principal, request.principal):
            return False
        if not self._resource_matches(request):
            return False
        return all(c.holds(request) for c in self.conditions)


@dataclass(frozen=True)
class Policy:
    name: str
    statements: tuple[Statement, ...]

    @classmethod
    def of(cls, document: Mapping[str, Any], name: str = "") -> Policy:
        return _compiled(json.dumps(document, sort_keys=True), name)

    def matches(self, request: Request) -> tuple[bool, bool, str]:
        """(some Allow applies, some Deny applies, the first applying statement's sid)."""
        allowed = denied = False
        sid = ""
        for statement in self.statements:
            if statement.applies(request):
                sid = sid or statement.sid or self.name
                if statement.allow:
                    allowed = True
                else:
                    denied = True
        return allowed, denied, sid


@functools.lru_cache(maxsize=512)
def _compiled(document: str, name: str) -> Policy:
    raw = json.loads(document)
    statements = raw.get("Statement", [])
    return Policy(name, tuple(Statement.parse(s) for s in _as_list(statements)))


def evaluate(policies: Sequence[Policy], request: Request) -> Decision:
    """Explicit deny > allow > implicit deny, over every policy that applies to the call
    (the caller's identity policies and, in the same account, the resource's policy)."""
    allowed = False
    for policy in policies:
        allow, deny, _ = policy.matches(request)
        if deny:
            return Decision.EXPLICIT_DENY
        allowed = allowed or allow
    return Decision.ALLOW if allowed else Decision.IMPLICIT_DENY
