#!/usr/bin/env python3
"""Generate ``ipc_schema/`` from the code: the method table, the notifications, the stream line, the IR.

    python scripts/gen_ipc_schema.py           # write ipc_schema/
    python scripts/gen_ipc_schema.py --check   # exit 1 if ipc_schema/ differs from the code

Outputs (all generated; edit the models, never these files):
  ipc_schema/metona-sidecar.schema.json  one JSON Schema (2020-12) document: every method's params and
                                         result, every notification each way, the stream line; shared $defs
  ipc_schema/defs/ir.json                the Metona IR models (camelCase, as on the wire)
  ipc_schema/metona-sidecar.d.ts         TypeScript declarations for the Electron side (json-schema-to-typescript)
  ipc_schema/defs/plugin-manifest.json   a plugin package's plugin.json (PluginManifest; unknown keys refused)
  ipc_schema/client/src/generated.ts     the same declarations as a module of the TypeScript client, plus its
                                         method map (method name → params, result) and the names it dispatches on
  ipc_schema/openrpc.json                OpenRPC 1.3 document of every method: params (by name) and result
                                         referencing the same definitions (components/schemas), the error codes
                                         its code can answer (scripts/ipc_doc.py), the notifications it emits,
                                         and its example from ipc_schema/examples.json (run by tests/docs)
``ipc_schema/README.md`` and ``ipc_schema/examples.json`` are hand-written and not touched (the examples' answers are
recorded by scripts/ipc_examples.py).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from pydantic import TypeAdapter  # noqa: E402

OUT = ROOT / "ipc_schema"
TS_TOOLS = ROOT / "tools" / "ts"
SCHEMA_FILE = "metona-sidecar.schema.json"
IR_FILE = "defs/ir.json"
TS_FILE = "metona-sidecar.d.ts"
MANIFEST_FILE = "defs/plugin-manifest.json"
CLIENT_TS_FILE = "client/src/generated.ts"
OPENRPC_FILE = "openrpc.json"
GENERATED = (SCHEMA_FILE, IR_FILE, TS_FILE, MANIFEST_FILE, CLIENT_TS_FILE, OPENRPC_FILE)


def _strip_field_titles(node: Any) -> Any:
    """Drop pydantic's per-field ``title`` (it only repeats the key and makes json2ts emit an alias per field)."""
    if isinstance(node, dict):
        out = {k: _strip_field_titles(v) for k, v in node.items()}
        props = out.get("properties")
        if isinstance(props, dict):
            out["properties"] = {
                k: ({kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) and "$ref" not in v else v)
                for k, v in props.items()
            }
        return out
    if isinstance(node, list):
        return [_strip_field_titles(v) for v in node]
    return node


def _dump(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def build_documents() -> dict[str, str]:
    from sidecar.app import schema_router
    from sidecar.ipc.lifecycle_models import CLIENT_NOTIFICATIONS
    from sidecar.ir import IR_MODELS, MetonaStreamEvent

    router = schema_router()
    inputs: list[tuple[tuple[str, str], Any, TypeAdapter[Any]]] = []
    methods = [m for m in router if not m.dev]
    for m in methods:
        inputs.append((("method", m.name + "#params"), "validation", TypeAdapter(m.params)))
        inputs.append((("method", m.name + "#result"), "serialization", TypeAdapter(m.result)))
    for n in router.notifications:
        inputs.append((("notification", n.method), "serialization", TypeAdapter(n.params)))
    for name, params in CLIENT_NOTIFICATIONS.items():
        inputs.append((("client_notification", name), "validation", TypeAdapter(params)))
    inputs.append((("stream", "line"), "serialization", TypeAdapter(MetonaStreamEvent)))
    keyed, top = TypeAdapter.json_schemas(
        [(key, mode, adapter) for key, mode, adapter in inputs], by_alias=True, ref_template="#/$defs/{model}"
    )
    schemas = {key: schema for (key, _mode), schema in keyed.items()}

    def method_entry(m: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "object",
            "properties": {
                "params": schemas[("method", m.name + "#params")],
                "result": schemas[("method", m.name + "#result")],
            },
            "required": ["params", "result"],
            "additionalProperties": False,
        }
        if m.summary:
            entry["description"] = m.summary
        return entry

    def note_entry(key: tuple[str, str], summary: str = "") -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "object",
            "properties": {"params": schemas[key]},
            "required": ["params"],
            "additionalProperties": False,
        }
        if summary:
            entry["description"] = summary
        return entry

    def group(entries: dict[str, Any], title: str) -> dict[str, Any]:
        return {
            "title": title,
            "type": "object",
            "properties": entries,
            "required": sorted(entries),
            "additionalProperties": False,
        }

    doc: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://metona.local/ipc/metona-sidecar.schema.json",
        "title": "MetonaSidecarIpc",
        "description": (
            "The wire contract of the Metona sidecar (newline-delimited JSON-RPC 2.0 over stdio). "
            "Generated by scripts/gen_ipc_schema.py from the code's models; see ipc_schema/README.md."
        ),
        "type": "object",
        "properties": {
            "methods": group({m.name: method_entry(m) for m in methods}, "MetonaSidecarMethods"),
            "notifications": group(
                {n.method: note_entry(("notification", n.method), n.summary) for n in router.notifications},
                "MetonaSidecarNotifications",
            ),
            "clientNotifications": group(
                {name: note_entry(("client_notification", name)) for name in CLIENT_NOTIFICATIONS},
                "MetonaHostNotifications",
            ),
            "streamLine": schemas[("stream", "line")],
        },
        "required": ["methods", "notifications", "clientNotifications", "streamLine"],
        "additionalProperties": False,
        "$defs": dict(sorted(top.get("$defs", {}).items())),
    }
    doc = _merge_mode_variants(doc)

    _ir_keyed, ir_top = TypeAdapter.json_schemas(
        [(model.__name__, "serialization", TypeAdapter(model)) for model in IR_MODELS],
        by_alias=True,
        ref_template="#/$defs/{model}",
    )
    ir_doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://metona.local/ipc/defs/ir.json",
        "title": "MetonaIR",
        "description": (
            "Metona IR v1.0 (metona-ir-standard.md) as the sidecar writes it: camelCase, absent optionals omitted."
        ),
        "$defs": dict(sorted(ir_top.get("$defs", {}).items())),
    }
    schema_doc = _strip_field_titles(doc)
    return {
        SCHEMA_FILE: _dump(schema_doc),
        IR_FILE: _dump(_strip_field_titles(ir_doc)),
        MANIFEST_FILE: _dump(_strip_field_titles(manifest_schema())),
        OPENRPC_FILE: _dump(build_openrpc(schema_doc, router)),
    }


def _components(node: Any) -> Any:
    """``#/$defs/X`` → ``#/components/schemas/X`` (the same definitions, where OpenRPC keeps them)."""
    if isinstance(node, dict):
        return {
            k: (
                v.replace("#/$defs/", "#/components/schemas/") if k == "$ref" and isinstance(v, str) else _components(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_components(v) for v in node]
    return node


def build_openrpc(schema_doc: dict[str, Any], router: Any) -> dict[str, Any]:
    """The OpenRPC 1.3 document: one method object per method of ``schema_doc`` (params by name)."""
    import ipc_doc
    import ipc_examples

    from sidecar import __version__

    facts = ipc_doc.method_facts(router)
    examples = ipc_examples.resolved(ipc_examples.load())
    defs = schema_doc["$defs"]
    methods = []
    for name, entry in schema_doc["properties"]["methods"]["properties"].items():
        params_schema = entry["properties"]["params"]
        model = defs[params_schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in params_schema else params_schema
        required = set(model.get("required", []))
        params = [
            {"name": key, "required": key in required, "schema": _components(sub)}
            for key, sub in model.get("properties", {}).items()
        ]
        errors = [
            {"code": code, "message": meaning, "data": {"code": data_code}}
            for code, data_code, meaning in ipc_doc.protocol_errors(name)
        ]
        errors += [
            {"code": e.status, "message": e.message or e.code, "data": {"code": e.code}} for e in facts[name]["errors"]
        ]
        method: dict[str, Any] = {
            "name": name,
            "summary": entry.get("description", name),
            "paramStructure": "by-name",
            "params": params,
            "result": {"name": "result", "schema": _components(entry["properties"]["result"])},
            "errors": errors,
        }
        emits = facts[name]["emits"] + (["stream lines"] if name in ipc_doc.STREAMS else [])
        if emits:
            method["x-emits"] = emits
        pairing = []
        for ex in examples.get(name, []):
            if "result" not in ex:
                continue
            pairing.append(
                {
                    "name": ex.get("title", name),
                    "params": [{"name": k, "value": v} for k, v in (ex.get("params") or {}).items()],
                    "result": {"name": "result", "value": ex["result"]},
                }
            )
        if pairing:
            method["examples"] = pairing
        methods.append(method)
    return {
        "openrpc": "1.3.2",
        "info": {
            "title": "Metona sidecar",
            "version": __version__,
            "description": (
                "Newline-delimited JSON-RPC 2.0 over stdio. Generated by scripts/gen_ipc_schema.py from the code's "
                "models, beside metona-sidecar.schema.json (the same definitions). Error integers: JSON-RPC's, "
                "-32002/-32800 (LSP's) and the phase-2 HTTP status; data.code is the code to branch on. x-emits: "
                "the notifications and stream lines a method causes."
            ),
        },
        "methods": methods,
        "components": {"schemas": _components(defs)},
    }


def manifest_schema() -> dict[str, Any]:
    """The JSON Schema of ``plugin.json`` (issue 11), from ``sidecar.plugins.models.PluginManifest``."""
    from sidecar.plugins.models import PluginManifest

    schema = PluginManifest.model_json_schema(ref_template="#/$defs/{model}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://metona.local/ipc/defs/plugin-manifest.json",
        **schema,
    }


def _merge_mode_variants(doc: dict[str, Any]) -> dict[str, Any]:
    """Fold ``X-Input``/``X-Output`` into one ``X`` where both are the same once their refs are (pydantic splits a
    model that one method takes and another returns, e.g. MetonaToolDef in chat params and ``tools/list``)."""
    while True:
        defs = doc["$defs"]
        for name in defs:
            base = name.removesuffix("-Input")
            out = base + "-Output"
            if base == name or out not in defs or base in defs:
                continue
            text = json.dumps(doc)
            for variant in (name, out):
                text = text.replace(f'"#/$defs/{variant}"', f'"#/$defs/{base}"')
            unified = json.loads(text)
            if unified["$defs"][name] == unified["$defs"][out]:
                unified["$defs"][base] = unified["$defs"].pop(name)
                del unified["$defs"][out]
                unified["$defs"] = dict(sorted(unified["$defs"].items()))
                doc = unified
                break
        else:
            return doc


def _bare_refs(node: Any) -> Any:
    """``{"$ref", "description"}`` → ``{"$ref"}``: json2ts would otherwise declare a copy of the type."""
    if isinstance(node, dict):
        if "$ref" in node:
            return {"$ref": node["$ref"]}
        return {k: _bare_refs(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_bare_refs(v) for v in node]
    return node


def build_typescript(schema_text: str, ir_text: str) -> str:
    json2ts = TS_TOOLS / "node_modules" / ".bin" / "json2ts"
    if not json2ts.exists():
        raise SystemExit(f"{json2ts} is missing: run `bash scripts/setup` (it installs the npm tools)")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / SCHEMA_FILE
        doc = json.loads(schema_text)
        # Every IR type gets a declaration, not only those a method uses today.
        for name, definition in json.loads(ir_text)["$defs"].items():
            existing = doc["$defs"].setdefault(name, definition)
            if existing != definition:
                raise SystemExit(f"IR type {name} differs between the method schemas and defs/ir.json")
        src.write_text(json.dumps(_bare_refs(doc)))
        out = subprocess.run(
            [
                str(json2ts),
                "--input",
                str(src),
                "--no-additionalProperties",
                "--unreachableDefinitions",
                "--format",
                "false",
                "--bannerComment",
                "/* Generated by scripts/gen_ipc_schema.py from the sidecar's models. Do not edit. */",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    return out.stdout


def build_client_module(declarations: str, schema_text: str) -> str:
    """The client's ``generated.ts``: the declarations, the method map the client is typed by, and the wire names
    it dispatches on (methods, the sidecar's notifications, the host's notifications, the terminal events)."""
    from sidecar.trace.models import TERMINAL_EVENTS

    doc = json.loads(schema_text)

    def names(group: str) -> str:
        return json.dumps(sorted(doc["properties"][group]["properties"]))

    tail = f"""
/** Method name → {{params, result}}: what `MetonaClient.request` is typed by. */
export type MetonaMethods = MetonaSidecarIpc["methods"]
export type MetonaMethod = keyof MetonaMethods
export type MetonaParams<M extends MetonaMethod> = MetonaMethods[M]["params"]
export type MetonaResult<M extends MetonaMethod> = MetonaMethods[M]["result"]
/** Notification name → params, sidecar → host (e.g. `event`). */
type Notes = MetonaSidecarIpc["notifications"]
export type MetonaNotifications = {{ [N in keyof Notes]: Notes[N]["params"] }}
export type MetonaNotification = keyof MetonaNotifications
/** Notification name → params, host → sidecar (`$/cancelRequest`, `exit`). */
type HostNotes = MetonaSidecarIpc["clientNotifications"]
export type MetonaHostNotifications = {{ [N in keyof HostNotes]: HostNotes[N]["params"] }}
export type MetonaHostNotification = keyof MetonaHostNotifications

export const METHODS: readonly MetonaMethod[] = {names("methods")}
export const NOTIFICATIONS: readonly MetonaNotification[] = {names("notifications")}
export const HOST_NOTIFICATIONS: readonly MetonaHostNotification[] = {names("clientNotifications")}
/** A resource event with one of these names ends its subscription (ARCHITECTURE §5). */
export const TERMINAL_EVENTS: readonly string[] = {json.dumps(sorted(TERMINAL_EVENTS))}
"""
    return declarations + tail


def generate(dest: Path) -> None:
    docs = build_documents()
    docs[TS_FILE] = build_typescript(docs[SCHEMA_FILE], docs[IR_FILE])
    docs[CLIENT_TS_FILE] = build_client_module(docs[TS_FILE], docs[SCHEMA_FILE])
    for rel, text in docs.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def check_typescript(dest: Path) -> None:
    """The declarations compile with tsc, together with a usage file that exercises them."""
    tsc = TS_TOOLS / "node_modules" / ".bin" / "tsc"
    usage = TS_TOOLS / "check" / "usage.ts"
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(dest / TS_FILE, Path(tmp) / TS_FILE)
        shutil.copy(usage, Path(tmp) / "usage.ts")
        subprocess.run(
            [
                str(tsc),
                "--noEmit",
                "--strict",
                "--target",
                "es2022",
                "--module",
                "es2022",
                "--moduleResolution",
                "bundler",
                str(Path(tmp) / "usage.ts"),
                str(Path(tmp) / TS_FILE),
            ],
            check=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with ipc_schema/ instead of writing")
    parser.add_argument("--no-tsc", action="store_true", help="skip the tsc compile check")
    args = parser.parse_args()
    os.environ.setdefault("METONA_LOG_LEVEL", "WARNING")
    if not args.check:
        generate(OUT)
        if not args.no_tsc:
            check_typescript(OUT)
        print(f"wrote {', '.join(GENERATED)} under {OUT.relative_to(ROOT)}/")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        drift = False
        for rel in GENERATED:
            old = (OUT / rel).read_text() if (OUT / rel).exists() else ""
            new = (fresh / rel).read_text()
            if old != new:
                drift = True
                sys.stdout.writelines(
                    list(
                        difflib.unified_diff(
                            old.splitlines(True), new.splitlines(True), f"ipc_schema/{rel}", "generated", n=2
                        )
                    )[:200]
                )
        if not args.no_tsc:
            check_typescript(fresh)
    if drift:
        print("ipc_schema/ is out of date: run `python scripts/gen_ipc_schema.py`", file=sys.stderr)
        return 1
    print("ipc_schema/ is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
