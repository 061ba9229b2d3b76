"""A JSON schema as the runtime's grammar (openvino-genai's EBNF), compact and with numbers of bounded length.

openvino-genai's ``json_schema`` constraint allows any whitespace between tokens and a number of any length, and
under greedy decoding the local models were measured falling into both: ``"alpha":`` and then spaces until the loop
guard (a nested object declaring no keys, where the model wanted a number; the same for a number it could not
write), ``"amount": 200.00000000000001000…`` until the token limit. The grammar written here allows what the
models write when nothing goes wrong — ``{"a": 1, "b": [2, 3]}``, ``": "`` after a key and ``", "`` between
members and items, no other whitespace — and a number of at most :data:`INTEGER_DIGITS` digits before its point,
:data:`FRACTION_DIGITS` after it and three in its exponent: more than a double holds is a runaway, not a value.

The schema's keys come in the order it declares them and each optional key may be left out, as the runtime's own
``json_schema`` constraint does (measured); a required key not among the properties is not asked for; an array's
``maxItems`` bounds its items. A schema
with anything else (``pattern``, ``minimum``, an object both declaring keys and open to others, an ``anyOf`` beside
other keys …) is not written here: :func:`compact_grammar` answers None and the caller keeps ``json_schema``.
"""

from __future__ import annotations

import json
from typing import Any

INTEGER_DIGITS = 17
"""Digits before a number's point: 17 is more than a double holds exactly (2**53 has 16); a longer run is a
runaway, which the grammar ends there (the caller tells it by the value: :func:`runaway`)."""
FRACTION_DIGITS = 12
EXPONENT_DIGITS = 3
MAX_ITEMS_WRITTEN = 64
"""The largest ``maxItems`` written into the grammar (one nested optional a further item); an array allowed more is
written unbounded."""

_READ = frozenset(
    {"type", "enum", "const", "properties", "required", "items", "additionalProperties", "anyOf", "maxItems"}
)
_IGNORED = frozenset({"description", "title", "default", "examples", "$schema"})
_COMMON = f"""string ::= "\\"" char* "\\""
char ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{{4}})
integral ::= "0" | [1-9] [0-9]{{0,{INTEGER_DIGITS - 1}}}
integer ::= "-"? integral
number ::= integer ("." [0-9]{{1,{FRACTION_DIGITS}}})? ([eE] [+-]? [0-9]{{1,{EXPONENT_DIGITS}}})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{{" (member (", " member)*)? "}}"
member ::= string ": " value
array ::= "[" (value (", " value)*)? "]"
"""
_SIMPLE = frozenset({"string", "number", "integer", "boolean", "null"})
"""Types whose rule in :data:`_COMMON` has the type's own name."""


class _Unsupported(Exception):
    pass


def compact_grammar(schema: dict[str, Any]) -> str | None:
    """The EBNF of the JSON texts ``schema`` allows, written compactly (see the module); None when the schema says
    something not written here."""
    rules: list[str] = []
    try:
        root = _node(schema, rules)
    except _Unsupported:
        return None
    return "\n".join([f"root ::= {root}", *rules]) + "\n" + _COMMON


def runaway(value: Any) -> bool:
    """A number anywhere in ``value`` with as many digits before its point as the grammar allows: the model did not
    stop writing digits, and the grammar stopped it."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return abs(value) >= 10 ** (INTEGER_DIGITS - 1)
    if isinstance(value, dict):
        return any(runaway(v) for v in value.values())
    if isinstance(value, list):
        return any(runaway(v) for v in value)
    return False


def _literal(text: str) -> str:
    """``text`` as an EBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _rule(rules: list[str], body: str) -> str:
    name = f"r{len(rules)}"
    rules.append(f"{name} ::= {body}")
    return name


def _node(schema: Any, rules: list[str]) -> str:
    if not isinstance(schema, dict) or not set(schema) <= _READ | _IGNORED:
        raise _Unsupported
    if "anyOf" in schema:  # one of the forms (a number, or a named value: int | Literal["all"])
        forms = schema["anyOf"]
        if not isinstance(forms, list) or not forms or set(schema) - {"anyOf"} - _IGNORED:
            raise _Unsupported
        return "(" + " | ".join(_node(form, rules) for form in forms) + ")"
    if "const" in schema:
        return _literal(_json(schema["const"]))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not values:
            raise _Unsupported
        return "(" + " | ".join(_literal(_json(v)) for v in values) + ")"
    kind = schema.get("type")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind is None:
        return "value"
    if isinstance(kind, list):
        if not kind:
            raise _Unsupported
        return "(" + " | ".join(_node({**schema, "type": k}, rules) for k in kind) + ")"
    if kind in _SIMPLE:
        return str(kind)
    if kind == "array":
        items = schema.get("items")
        item = _node(items, rules) if items is not None else "value"
        most = schema.get("maxItems")
        if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 0):
            raise _Unsupported
        if most is None or most > MAX_ITEMS_WRITTEN:
            return _rule(rules, f'"[" ({item} (", " {item})*)? "]"')
        if most > 1 and not item.isidentifier():
            item = _rule(rules, item)  # written once, named at each place
        more = ""  # at most ``most`` items: each further one optional after the one before it
        for _ in range(most - 1):
            more = f'(", " {item}{" " + more if more else ""})?'
        return _rule(rules, f'"[" ({item}{" " + more if more else ""})? "]"' if most else '"[]"')
    if kind == "object":
        return _object(schema, rules)
    raise _Unsupported


def _object(schema: dict[str, Any], rules: list[str]) -> str:
    properties = schema.get("properties") or {}
    closed = schema.get("additionalProperties") is False
    if not isinstance(properties, dict):
        raise _Unsupported
    if not properties:
        return '"{}"' if closed else "object"
    if not closed:
        raise _Unsupported
    required = set(schema.get("required") or ())
    members = [
        (_literal(_json(key) + ": ") + " " + _node(spec, rules), key in required) for key, spec in properties.items()
    ]
    tails: dict[int, str | None] = {len(members): None}

    def tail(i: int) -> str | None:
        """The members from ``i`` on, each after ``", "`` (an optional one may be left out): a rule, made once."""
        if i not in tails:
            member, needed = members[i]
            rest = tail(i + 1)
            part = f'", " {member}' if needed else f'(", " {member})?'
            tails[i] = _rule(rules, part + (f" {rest}" if rest else ""))
        return tails[i]

    firsts: list[str] = []
    for i, (member, needed) in enumerate(members):  # the first member written: any up to the first required one
        rest = tail(i + 1)
        firsts.append(member + (f" {rest}" if rest else ""))
        if needed:
            break
    body = " | ".join(f"({first})" for first in firsts)
    return _rule(rules, f'"{{" ({body})' + ("" if any(needed for _, needed in members) else "?") + ' "}"')
