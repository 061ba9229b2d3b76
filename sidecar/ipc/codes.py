"""The integer code table of the wire (ARCHITECTURE.md §4), in one place."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800

NOT_AN_OBJECT = {"loc": [], "type": "object_type", "msg": "params must be a JSON object"}
"""The validation error of a method given positional params (every method takes an object)."""
