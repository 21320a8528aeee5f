"""Bodies built from an excerpted JSON Schema: the example and every edge the schema allows.

`edge_cases(schema, example)` walks the schema and a valid example together and
returns one `Case` per edge, each one change away from the example:

- every optional property absent (one at a time, and all at once, recursively);
- every property that may be null, null; every optional one null too (providers
  print absent fields as null: OpenAI's own examples do);
- every integer at its bounds: the declared minimum and maximum, the int32 or
  int64 range of its format, and where nothing bounds it -1, 0, 2**53 + 1 (the
  first integer a double cannot hold) and a 400-digit number (JSON allows it);
- every number at its bounds (or -1.5, 0 and 1e308 where unbounded);
- every string empty and 10,000 characters long, where the schema allows;
- every enum value, and one value the document does not list;
- every boolean flipped, every array empty;
- on every object, one property the document does not list.

A case is `documented` when the excerpt accepts it (the tests check that with
a JSON Schema validator); the others -- an unknown enum value, a property the
schema closes off, null where only absence is allowed -- are what a newer
version of the provider may send. Only the walk is generic; which edges are
worth a case comes from the schema, so a new excerpt needs no new code.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

# Values no provider document lists: what a newer API version might send.
UNKNOWN_ENUM = "jobwarden-contract-unknown"
UNKNOWN_PROPERTY = "jobwarden_contract_unknown"
# 2**53 + 1 is the first integer a double cannot represent: counts above it
# must not be rounded on their way into a fact.
PAST_DOUBLE = 2**53 + 1
HUGE_INTEGER = 10**400
LONG_TEXT = "x" * 10_000

_CHECKED_FORMATS = frozenset(FormatChecker().checkers)
_FORMAT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

Pointer = tuple[str | int, ...]


@dataclass(frozen=True)
class Case:
    label: str
    body: Any
    documented: bool


def edge_cases(schema: Mapping[str, Any], example: Any) -> list[Case]:
    """The example, then one case per edge (see the module docstring)."""
    cases = [
        Case("example", example, True),
        Case("every optional property absent", minimal(schema, example), True),
    ]
    for pointer, sub, value in _nodes(schema, example, ()):
        for label, edge, documented in _edges(sub, value):
            body = _replaced(example, pointer, edge)
            cases.append(Case(f"{_text(pointer)}: {label}", body, documented))
    return _unique(cases)


def minimal(schema: Mapping[str, Any], value: Any) -> Any:
    """`value` with every property its schema does not require left out, at every depth."""
    sub = branch(schema, value)
    if isinstance(value, dict):
        required = set(sub.get("required", ()))
        return {
            key: minimal(property_schema(sub, key), item)
            for key, item in value.items()
            if key in required
        }
    if isinstance(value, list):
        items = sub.get("items", {})
        return [minimal(items, item) for item in value]
    return value


# Validators by excerpt (the excerpts are module constants, so their ids stay theirs):
# checking a schema costs tens of milliseconds, and hundreds of cases share one.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}


def validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator for an excerpt (formats checked: `uuid` is one AIP-155 insists on)."""
    known = _VALIDATORS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    Draft202012Validator.check_schema(schema)
    made = Draft202012Validator(schema, format_checker=FormatChecker())
    _VALIDATORS[id(schema)] = (schema, made)
    return made


def branch(schema: Mapping[str, Any], value: Any) -> Mapping[str, Any]:
    """The part of `schema` that describes `value` (the matching anyOf/oneOf branch)."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            fitting = [o for o in options if validator(o).is_valid(value)]
            fitting = fitting or [o for o in options if _type_of(value) in _types(o)]
            return branch(fitting[0], value) if fitting else {}
    return schema


def property_schema(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """What `schema` says of its property `key` (its additionalProperties when unnamed)."""
    named = schema.get("properties", {})
    if key in named:
        return named[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties", {})
    return extra if isinstance(extra, Mapping) else {}


def allows_null(schema: Mapping[str, Any]) -> bool:
    if "null" in _types(schema):
        return True
    return any(allows_null(option) for key in ("anyOf", "oneOf") for option in schema.get(key, ()))


def _nodes(
    schema: Mapping[str, Any], value: Any, pointer: Pointer
) -> Iterator[tuple[Pointer, Mapping[str, Any], Any]]:
    sub = branch(schema, value)
    yield pointer, sub, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(property_schema(sub, key), item, (*pointer, key))
    elif isinstance(value, list):
        items = sub.get("items", {})
        for index, item in enumerate(value):
            yield from _nodes(items, item, (*pointer, index))


_Edge = tuple[str, Any, bool]
_ABSENT = object()


def _edges(sub: Mapping[str, Any], value: Any) -> Iterator[_Edge]:
    if isinstance(value, dict):
        yield from _object_edges(sub, value)
    elif isinstance(value, list):
        if not sub.get("minItems"):
            yield "empty", [], True
    elif isinstance(value, bool):
        yield f"{not value}".lower(), not value, True
    elif isinstance(value, int):
        yield from _integer_edges(sub)
    elif isinstance(value, float):
        yield from _number_edges(sub)
    elif isinstance(value, str):
        yield from _string_edges(sub)


def _object_edges(sub: Mapping[str, Any], value: dict[str, Any]) -> Iterator[_Edge]:
    required = set(sub.get("required", ()))
    for key in value:
        optional = key not in required
        whole = {k: v for k, v in value.items() if k != key}
        if optional:
            yield f"{key} absent", _Whole(whole), True
        if allows_null(property_schema(sub, key)):
            yield f"{key} null", _Whole({**value, key: None}), True
        elif optional:
            yield f"{key} null (optional)", _Whole({**value, key: None}), False
    extra = {**value, UNKNOWN_PROPERTY: {"nested": [1, None]}}
    # Documented only where the schema leaves other properties open (absent or `true`).
    yield "unknown property", _Whole(extra), sub.get("additionalProperties", True) is True


def _integer_edges(sub: Mapping[str, Any]) -> Iterator[_Edge]:
    low, high = _FORMAT_BOUNDS.get(sub.get("format", ""), (None, None))
    low = sub.get("minimum", low)
    high = sub.get("maximum", high)
    candidates = [low] if low is not None else [-1, 0]
    candidates += [high] if high is not None else [PAST_DOUBLE, HUGE_INTEGER]
    for number in dict.fromkeys(candidates):
        shown = "10**400" if number == HUGE_INTEGER else str(number)
        yield f"= {shown}", number, True
    yield from _enum_edges(sub)


def _number_edges(sub: Mapping[str, Any]) -> Iterator[_Edge]:
    low = sub.get("minimum")
    high = sub.get("maximum")
    candidates = [float(low)] if low is not None else [-1.5, 0.0]
    candidates += [float(high)] if high is not None else [1e308]
    for number in dict.fromkeys(candidates):
        yield f"= {number!r}", number, True


def _string_edges(sub: Mapping[str, Any]) -> Iterator[_Edge]:
    if "enum" in sub or "const" in sub:
        yield from _enum_edges(sub)
        return
    # Outside a format the validator checks (uuid...), any text is documented.
    free = "pattern" not in sub and sub.get("format") not in _CHECKED_FORMATS
    yield "empty", "", free and not sub.get("minLength")
    yield "10,000 characters", LONG_TEXT, free and "maxLength" not in sub


def _enum_edges(sub: Mapping[str, Any]) -> Iterator[_Edge]:
    values = list(sub.get("enum", ())) + ([sub["const"]] if "const" in sub else [])
    for allowed in values:
        yield f"= {allowed!r}", allowed, True
    if values:
        unknown: Any = UNKNOWN_ENUM if isinstance(values[0], str) else 987_654
        yield "= a value the document does not list", unknown, False


@dataclass(frozen=True)
class _Whole:
    """An edge that replaces the whole object (a property dropped or added)."""

    value: dict[str, Any]


def _replaced(document: Any, pointer: Pointer, edge: Any) -> Any:
    new = edge.value if isinstance(edge, _Whole) else edge
    if not pointer:
        return copy.deepcopy(new)
    result = copy.deepcopy(document)
    node = result
    for step in pointer[:-1]:
        node = node[step]
    node[pointer[-1]] = copy.deepcopy(new)
    return result


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        kinds = {"object", "array", "string", "integer", "number", "boolean", "null"}
        if any(key in schema for key in ("anyOf", "oneOf")):
            return {t for key in ("anyOf", "oneOf") for o in schema.get(key, ()) for t in _types(o)}
        return kinds
    names = {declared} if isinstance(declared, str) else set(declared)
    if "number" in names:
        names.add("integer")
    return names


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _text(pointer: Pointer) -> str:
    return "/" + "/".join(str(step) for step in pointer) if pointer else "(body)"


def _unique(cases: list[Case]) -> list[Case]:
    seen: dict[str, Case] = {}
    for case in cases:
        seen.setdefault(case.label, case)
    return list(seen.values())
