"""The base of every Metona IR wire object.

IR objects are camelCase on the wire, exactly as the IR standard writes them, and an absent optional
field is omitted, never ``null`` (ARCHITECTURE.md §2-§3). :class:`WireModel` does both without the caller
passing ``by_alias``/``exclude_none``: it works for ``model_dump``, ``model_dump_json`` and
``TypeAdapter(...).dump_python/dump_json`` alike, because it is a model serializer.

The one exception to "``None`` means absent" is a field typed ``unknown`` in the seed (``Any`` here, e.g.
``MetonaResponse.structuredOutput``): JSON ``null`` is a legitimate value there, so the key is kept when it
was explicitly set (it is in ``model_fields_set``) and dropped only when it was never given.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

# (field name, wire key, keep an explicitly set None)
_Plan = tuple[tuple[str, str, bool], ...]


class WireModel(BaseModel):
    """camelCase in and out, unknown keys ignored (forward compatibility), absent optionals omitted."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="ignore",
        use_attribute_docstrings=True,
        defer_build=True,  # schemas are built on first use: start-up must stay fast
    )

    __wire_plan__: ClassVar[_Plan | None] = None

    @classmethod
    def _wire_plan(cls) -> _Plan:
        """The optional fields of ``cls`` whose ``None`` value is dropped on output (computed once)."""
        plan = cls.__dict__.get("__wire_plan__")
        if plan is None:
            plan = tuple(
                (name, field.alias or name, field.annotation is Any)
                for name, field in cls.model_fields.items()
                if not field.is_required() and field.default is None
            )
            cls.__wire_plan__ = plan
        return plan

    # No return annotation on purpose: pydantic would use it as the serialization JSON schema
    # (``dict[str, Any]`` gives a property-less object). Without one, the model's own schema is used; hence the
    # one ignore of the strict no-untyped-def check here.
    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data = handler(self)
        if type(data) is not dict:
            return data
        fields_set = self.__pydantic_fields_set__
        for name, key, keep_null in self._wire_plan():
            if getattr(self, name) is None and not (keep_null and name in fields_set):
                data.pop(key, None)
                data.pop(name, None)
        return data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """Describe omitted-when-absent fields as optional and non-null (what the wire actually carries)."""
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        props = target.get("properties")
        if props:
            for _name, key, keep_null in cls._wire_plan():
                prop = props.get(key)
                if prop is None or keep_null:
                    continue
                prop.pop("default", None)
                any_of = prop.get("anyOf")
                if isinstance(any_of, list):
                    rest = [s for s in any_of if s != {"type": "null"}]
                    if len(rest) == 1:
                        del prop["anyOf"]
                        prop.update(rest[0])
                    else:
                        prop["anyOf"] = rest
        return schema
