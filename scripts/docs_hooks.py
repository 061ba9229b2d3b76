"""MkDocs hooks (mkdocs.yml ``hooks:``): the method reference and the error table, generated from the code at build.

* ``on_files`` adds ``reference/index.md`` and one ``reference/<domain>.md`` per domain, built from the router's
  method table (``sidecar.app.schema_router``) through ``scripts/gen_ipc_schema.py`` (the same schema and OpenRPC
  document it writes) and ``ipc_schema/examples.json`` (the examples tests/docs runs);
* ``on_page_markdown`` fills the markers ``<!-- generated: error-table -->`` (every error code the methods can
  answer: wire integer, ``data.code``, meaning, methods) and ``<!-- include: PATH#HEADING -->`` (a section of a
  file outside docs/, e.g. the not-found table that tests read from ipc_schema/README.md).
"""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

# a domain's reference page: the first segment of the method name, lifecycle methods together
LIFECYCLE = {"initialize", "ping", "shutdown", "events/subscribe", "events/unsubscribe"}
PAGE_TITLES = {
    "lifecycle": "Lifecycle and events",
    "providers": "Providers",
    "chat": "Chat",
    "config": "Config",
    "agent": "Agent runs",
    "tools": "Tools",
    "memory": "Memory",
    "notes": "Notes",
    "attachments": "Attachments",
    "search": "Search",
    "index-methods": "Index",
    "documents": "Documents (imports)",
    "media": "Transcription (media)",
    "plugins": "Plugins",
    "plugin-contributions": "Plugin commands",
    "benchmarks": "Benchmarks",
    "exports": "Exports",
    "render": "Rendering",
    "themes": "Themes",
}
MAX_STRING = 160
MAX_ITEMS = 3


def page_of(method: str) -> str:
    if method in LIFECYCLE:
        return "lifecycle"
    domain = method.split("/", 1)[0]
    return "index-methods" if domain == "index" else domain  # reference/index.md is the reference's own index


def title_of(page: str) -> str:
    return PAGE_TITLES.get(page, page.replace("-", " ").capitalize())


@cache
def model() -> dict[str, Any]:
    """The schema document, the OpenRPC document and the examples, from the code (as gen_ipc_schema.py writes them)."""
    os.environ.setdefault("METONA_LOG_LEVEL", "WARNING")
    for path in (str(ROOT), str(ROOT / "scripts")):  # mkdocs loads a hook with its own sys.path
        if path not in sys.path:
            sys.path.insert(0, path)
    import gen_ipc_schema
    import ipc_examples

    docs = gen_ipc_schema.build_documents()
    return {
        "schema": json.loads(docs[gen_ipc_schema.SCHEMA_FILE]),
        "openrpc": json.loads(docs[gen_ipc_schema.OPENRPC_FILE]),
        "examples": ipc_examples.resolved(ipc_examples.load()),
    }


# -- rendering schemas as short types ---------------------------------------------------------------------------
def slug(name: str) -> str:
    """The anchor MkDocs gives the heading ``## name`` (its default slugify)."""
    return "".join(c for c in name.lower() if c.isalnum() or c in "-_ ").strip().replace(" ", "-")


def type_of(s: dict[str, Any]) -> str:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](types.md#{slug(name)})"
    if "const" in s:
        return f"`{json.dumps(s['const'])}`"
    if "enum" in s:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in s["enum"])
    for key in ("anyOf", "oneOf"):
        if key in s:
            return " \\| ".join(type_of(v) for v in s[key])
    t = s.get("type")
    if t == "array":
        return f"list[{type_of(s.get('items', {}))}]"
    if t == "object" and "additionalProperties" in s and isinstance(s["additionalProperties"], dict):
        return f"map[string, {type_of(s['additionalProperties'])}]"
    if isinstance(t, list):
        return " \\| ".join(f"`{x}`" for x in t)
    return f"`{t}`" if t else "any"


def cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def fields_table(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    target = defs[schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else schema
    props = target.get("properties")
    if not props:
        return [f"{type_of(schema)}" + (" (no fields)" if target.get("type") == "object" else ""), ""]
    required = set(target.get("required", []))
    out = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, sub in props.items():
        desc = sub.get("description", "")
        if "default" in sub and name not in required:
            desc = (desc + " " if desc else "") + f"Default `{json.dumps(sub['default'], ensure_ascii=False)}`."
        out.append(f"| `{name}` | {type_of(sub)} | {'yes' if name in required else ''} | {cell(desc)} |")
    return [*out, ""]


def trimmed(value: Any) -> Any:
    """A shown answer: long strings cut, long lists shortened (the full answer is in ipc_schema/examples.json)."""
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + f"… ({len(value)} characters)"
    if isinstance(value, list):
        head = [trimmed(v) for v in value[:MAX_ITEMS]]
        return head + ([f"… {len(value) - MAX_ITEMS} more"] if len(value) > MAX_ITEMS else [])
    if isinstance(value, dict):
        return {k: trimmed(v) for k, v in value.items()}
    return value


def json_block(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2, ensure_ascii=False), "```", ""]


def method_section(method: dict[str, Any], schema: dict[str, Any], examples: list[dict[str, Any]]) -> list[str]:
    name = method["name"]
    defs = schema["$defs"]
    entry = schema["properties"]["methods"]["properties"][name]
    out = [f"## `{name}`", "", method.get("summary", ""), ""]
    out += ["**Params**", "", *fields_table(entry["properties"]["params"], defs)]
    out += [
        f"**Result**: {type_of(entry['properties']['result'])}",
        "",
        *fields_table(entry["properties"]["result"], defs),
    ]
    out += ["**Errors** it can answer (besides the [protocol errors](../concepts/errors.md#protocol-errors)):", ""]
    own = [e for e in method["errors"] if e["code"] > 0 or e["data"]["code"] not in PROTOCOL_CODES]
    if own:
        out += ["| code | `data.code` | message |", "|---|---|---|"]
        out += [f"| {e['code']} | `{e['data']['code']}` | {cell(e['message'])} |" for e in own]
    else:
        out += ["none of its own."]
    out.append("")
    emits = method.get("x-emits", [])
    if emits:
        out += ["**Emits**:", ""]
        for what in emits:
            out.append(f"- {EMITS.get(what, f'the notification `{what}`')}")
        out.append("")
    for i, ex in enumerate(examples):
        title = ex.get("title") or "Example"
        out += [f"**{title}**" if i else "**Example**", ""]
        if ex.get("note"):
            out += [ex["note"], ""]
        for step in ex.get("before", []):
            out += [f"(After `{step['method']}` answered `{json.dumps(step.get('until', {}))}`.)", ""]
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": name}
        if "params" in ex:
            request["params"] = ex["params"]
        out += json_block(request)
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": 7}
        if "result" in ex:
            answer["result"] = trimmed(ex["result"])
        elif "error" in ex:
            answer["error"] = trimmed(ex["error"])
        else:
            answer["result"] = "(not recorded yet: python scripts/ipc_examples.py --record)"
        out += json_block(answer)
    return out


PROTOCOL_CODES = {"VALIDATION_ERROR", "REQUEST_CANCELLED", "NOT_INITIALIZED", "INTERNAL_ERROR"}
EMITS = {
    "stream lines": "MetonaStreamEvent lines before its answer (see [Stream events](../concepts/streams.md))",
    "resource events": (
        "resource events of the job or run it starts: `events/subscribe` on its id, or the domain's `.../events` "
        "(see [Jobs and their events](../concepts/jobs-events.md))"
    ),
    "event": "the `event` notification, once per resource event (replay, then live)",
    "agent/providerSwitched": "the notification `agent/providerSwitched` when a run fails over to another provider",
    "local/modelProgress": "the notification `local/modelProgress` while the local model is prepared",
}


def reference_pages() -> dict[str, str]:
    m = model()
    schema, openrpc, examples = m["schema"], m["openrpc"], m["examples"]
    by_page: dict[str, list[dict[str, Any]]] = {}
    for method in openrpc["methods"]:
        by_page.setdefault(page_of(method["name"]), []).append(method)
    pages: dict[str, str] = {}
    index = [
        "# Method reference",
        "",
        "Generated at build time from the code's method table and models (the same source as "
        "`ipc_schema/metona-sidecar.schema.json` and `ipc_schema/openrpc.json`). Every example below is sent to a "
        "real sidecar by the test suite (`tests/docs/test_examples.py`). Field names are exactly as on the wire.",
        "",
        "| method | summary |",
        "|---|---|",
    ]
    order = sorted(by_page, key=lambda p: list(PAGE_TITLES).index(p) if p in PAGE_TITLES else 99)
    for page in order:
        for method in by_page[page]:
            anchor = method["name"].replace("/", "").replace("$", "")
            index.append(f"| [`{method['name']}`]({page}.md#{anchor}) | {cell(method.get('summary', ''))} |")
        body = [f"# {title_of(page)}", ""]
        for method in by_page[page]:
            body += method_section(method, schema, examples.get(method["name"], []))
        pages[f"reference/{page}.md"] = "\n".join(body) + "\n"
    pages["reference/types.md"] = types_page(schema)
    notes = schema["properties"]["notifications"]["properties"]
    index += ["", "## Notifications (sidecar → host)", "", "| method | summary |", "|---|---|"]
    index += [f"| `{n}` | {cell(e.get('description', ''))} |" for n, e in notes.items()]
    index += [
        "",
        'Host → sidecar: `exit` and `$/cancelRequest {"id"}` (see [The wire](../concepts/wire.md)).',
        "",
        "Every type the params and results name: [Types](types.md).",
        "",
    ]
    pages["reference/index.md"] = "\n".join(index) + "\n"
    pages["_nav"] = json.dumps([*({title_of(p): f"reference/{p}.md"} for p in order), {"Types": "reference/types.md"}])
    return pages


def types_page(schema: dict[str, Any]) -> str:
    defs = schema["$defs"]
    out = [
        "# Types",
        "",
        "Every definition the methods' params and results use (`$defs` of `ipc_schema/metona-sidecar.schema.json`, "
        "`components/schemas` of `ipc_schema/openrpc.json`). IR types are camelCase, phase-2 types snake_case; "
        "`-Input`/`-Output` are a model as the sidecar reads it and as it writes it, where they differ.",
        "",
    ]
    for name, d in defs.items():
        out += [f"## {name}", ""]
        if d.get("description"):
            out += [cell(d["description"]), ""]
        if d.get("properties"):
            out += fields_table(d, defs)
        else:
            out += [f"{type_of(d)}", ""]
    return "\n".join(out) + "\n"


def error_table() -> str:
    m = model()
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for method in m["openrpc"]["methods"]:
        for e in method["errors"]:
            key = (e["code"], e["data"]["code"])
            row = rows.setdefault(key, {"message": e["message"], "methods": []})
            row["methods"].append(method["name"])
    out = ["| code | `data.code` | meaning (a message the code gives) | methods |", "|---|---|---|---|"]
    for (code, data_code), row in sorted(rows.items(), key=lambda kv: (kv[0][0] < 0, kv[0][0], kv[0][1])):
        names = row["methods"]
        shown = (
            "every method"
            if len(names) > 60
            else ", ".join(
                f"[`{n}`](../reference/{page_of(n)}.md#{n.replace('/', '').replace('$', '')})" for n in names
            )
        )
        out.append(f"| {code} | `{data_code}` | {cell(row['message'])} | {shown} |")
    return "\n".join(out) + "\n"


def include(spec: str) -> str:
    path, _, heading = spec.partition("#")
    text = (ROOT / path).read_text(encoding="utf-8")
    start = text.index("\n## " + heading) + 1
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return section.split("\n", 1)[1]  # without its heading: the page gives its own


# -- MkDocs events ----------------------------------------------------------------------------------------------
def on_config(config: Any) -> Any:
    """The nav's ``Method reference`` entry becomes its index plus one page per domain (a new domain needs no edit)."""
    pages = json.loads(reference_pages()["_nav"])
    for i, item in enumerate(config["nav"] or []):
        if isinstance(item, dict) and "Method reference" in item:
            config["nav"][i] = {"Method reference": ["reference/index.md", *pages]}
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in reference_pages().items():
        if path == "_nav":
            continue
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- generated: error-table -->" in markdown:
        markdown = markdown.replace("<!-- generated: error-table -->", error_table())
    while "<!-- include: " in markdown:
        start = markdown.index("<!-- include: ")
        end = markdown.index(" -->", start)
        markdown = markdown[:start] + include(markdown[start + len("<!-- include: ") : end]) + markdown[end + 4 :]
    return markdown
