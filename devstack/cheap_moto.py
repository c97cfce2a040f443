"""moto's dispatch and DynamoDB expressions without the work it redid for every request.

The embedded AWS answers every AWS call of the local stack, the test suite and the benches
in one interpreter. Profiled in thread CPU time (a conditional UpdateItem and a GetItem in
turn), moto worked out again for each request what the requests before it had:

- **Its package directory**, listed on disk twice a request: listed once.
- **The handler's method names**, listed with ``inspect.getmembers`` to see whether the
  action is one of them: once per handler class.
- **The request id**, 52 characters drawn one ``random.choice`` at a time: one
  ``random.choices`` from the same characters.
- **Update expressions**, parsed twice an UpdateItem: each parsed once, its tree copied
  through pickle (~3x faster than ``deepcopy`` for these trees) for the validator to work on.
- **The validator's ten passes** over that tree built, at every node, a dict of their node
  types and bound methods and checked the node against each type (ABCs, whose check runs
  Python code): each pass finds a node type's method once, and a type's checks are kept.
- **Condition expressions**, lexed by trying seven regular expressions at each token: the
  tokens of each expression are kept, fresh copies handed out (the parser builds on them).

Measured on this change (``tests/integration/test_cheap_moto.py`` holds the answers and the
refusals, message for message, to moto's own): 1.49 -> 1.31 ms of the server's CPU a
request for that pair, 58 -> 55 ms of the embedded AWS's CPU a job
(``bench/cpu_per_job.py``). Nothing here changes what moto answers or refuses: the same
code runs on the same inputs.
"""

from __future__ import annotations

import copy
import functools
import pickle
import string
from collections import deque
from typing import Any

_ID_CHARACTERS = string.ascii_letters + string.digits
_LEXED_MAX = 1024


def make_moto_cheap() -> None:
    """Patch moto in this process (see the module docstring). Call once."""
    _cache_module_list()
    _cache_method_names()
    _quick_request_ids()
    _parse_update_expressions_once()
    _traversers_keep_their_map()
    _lex_conditions_once()


def _cache_module_list() -> None:
    """moto lists its package directory on disk (twice) for every request."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = functools.cache(lambda: modules)


def _cache_method_names() -> None:
    from moto.core import responses as handlers
    from moto.core import utils

    responses: Any = handlers
    listed = functools.cache(lambda cls: frozenset(utils.method_names_from_class(cls)))
    responses.method_names_from_class = listed


def _quick_request_ids() -> None:
    from moto.core import responses as handlers
    from moto.moto_api._internal import mock_random

    def request_id(headers: dict[str, Any] | None = None) -> str:
        made = "".join(mock_random.choices(_ID_CHARACTERS, k=52))
        if isinstance(headers, dict):
            headers["x-amzn-requestid"] = made
        return made

    responses: Any = handlers
    responses.gen_amzn_requestid_long = request_id


def _parse_update_expressions_once() -> None:
    """moto parses an UpdateExpression twice per UpdateItem (to check it, then to apply it)
    and its validator deep-copies the tree before working on the copy. The stack sends the
    same few expressions over and over, so each is parsed once, and the copy is made
    through pickle, which is ~3x faster than deepcopy for these trees (measured)."""
    from moto.dynamodb.parsing import expressions, validators

    parser: Any = expressions.UpdateExpressionParser  # type: ignore[attr-defined]
    parser.make = staticmethod(functools.lru_cache(maxsize=1024)(parser.make))

    def copied(value: Any, memo: dict[int, Any] | None = None) -> Any:
        try:  # S301: these bytes were made by this process a moment ago
            return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))  # noqa: S301
        except Exception:  # not picklable: as moto would
            return copy.deepcopy(value, memo)

    validators.deepcopy = copied  # type: ignore[assignment]


@functools.cache
def _is_a(kind: Any, of: Any) -> bool:
    """``isinstance`` by the object's type, remembered: moto's tree nodes are ABCs, whose
    check runs Python code each time (its result depends on the type alone)."""
    return issubclass(kind, of)


# moto's tree node types, filled in when the traversal is patched.
_NODE: dict[str, type] = {}


def _traversers_keep_their_map() -> None:
    """The validator's passes: each finds the method for a node's type once, not by building
    its map of types to methods at every node and checking the node against each."""
    from moto.dynamodb.parsing import ast_nodes as parsed

    ast_nodes: Any = parsed  # untyped in moto
    _NODE.update(
        node=ast_nodes.Node,
        expression=ast_nodes.Expression,
        function=ast_nodes.UpdateExpressionFunction,
    )
    traverser: Any = ast_nodes.DepthFirstTraverser
    traverser.traverse_node_recursively = _traverse
    ast_nodes.Node.find_clauses = _find_clauses


def _processor_for(traverser: Any, kind: type) -> Any:
    """The pass's method for nodes of ``kind``: its map's first type they are instances of."""
    found: dict[type, Any] | None = traverser.__dict__.get("_pagefleet_processors")
    if found is None:
        found = traverser.__dict__["_pagefleet_processors"] = {}
    if kind not in found:
        mapping = traverser._processing_map()
        found[kind] = next((mapping[t] for t in mapping if _is_a(kind, t)), None)
    return found[kind]


def _traverse(self: Any, node: Any, child_id: int = -1) -> Any:
    """``DepthFirstTraverser.traverse_node_recursively``, with the types' checks kept."""
    kind: Any = type(node)
    if not _is_a(kind, _NODE["node"]):
        return node
    parent_node = node.parent
    if node.children is not None:
        for i, child_node in enumerate(node.children):
            self.pre_processing_of_child(node, i)
            self.traverse_node_recursively(child_node, i)
    processor = _processor_for(self, kind)
    if processor is not None:
        node = processor(node)
        node.parent = parent_node
        if parent_node:
            parent_node.children[child_id] = node
    return node


def _find_clauses(self: Any, clause_types: Any) -> list[Any]:
    """``Node.find_clauses``, with the types' checks kept."""
    clauses = []
    for child in self.children or []:
        kind: Any = type(child)
        if kind in clause_types:
            clauses.append(child)
        elif _is_a(kind, _NODE["expression"]) or _is_a(kind, _NODE["function"]):
            clauses.extend(child.find_clauses(clause_types))
    return clauses


def _lex_conditions_once() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser._lex_condition_expression

    @functools.lru_cache(maxsize=_LEXED_MAX)
    def lexed(expression: str) -> tuple[Any, ...]:
        probe = ConditionExpressionParser.__new__(ConditionExpressionParser)
        probe.condition_expression = expression
        return tuple(original(probe))

    def lex(self: Any) -> deque[Any]:
        # Fresh nodes each time: the parser's later stages build on them.
        return deque(
            node._replace(children=list(node.children)) for node in lexed(self.condition_expression)
        )

    ConditionExpressionParser._lex_condition_expression = lex  # type: ignore[method-assign]
