"""Review regressions over real stdio for plugins, rendering, themes and benchmarks: hostile packages and params
get their typed codes (never INTERNAL_ERROR) and the process keeps answering."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plugins.support import make_plugin, run_agent
from tests.support.render_check import assert_safe_svg
from tests.support.sidecar_proc import Sidecar
from tests.support.theme_packages import good_files, write_zip

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("review-b")


@pytest.fixture(scope="module")
def sc(home: Path) -> Iterator[Sidecar]:
    data = home / "data"
    data.mkdir()
    sidecar = Sidecar(data, args=["--development"])
    try:
        sidecar.components = sidecar.initialize()["capabilities"]["components"]  # type: ignore[attr-defined]
        yield sidecar
    finally:
        sidecar.close()


def _error(sc: Sidecar, method: str, params: dict, timeout: float = 20) -> tuple[int, str]:
    reply = sc.call(method, params, timeout=timeout)
    assert "error" in reply, reply
    assert "Traceback" not in json.dumps(reply)
    return reply["error"]["code"], reply["error"]["data"]["code"]


def _zip(path: Path, entries: list[tuple[str, bytes]]) -> Path:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name
        for name, data in entries:
            archive.writestr(name, data)
    return path


def test_plugin_zips_with_duplicate_or_conflicting_entries_are_invalid_packages(sc: Sidecar, home: Path) -> None:
    manifest = (make_plugin(home, "dupe") / "plugin.json").read_bytes()
    cases = {
        "dup": [("plugin.json", manifest), ("plugin.json", manifest)],
        "file-then-dir": [("plugin.json", manifest), ("a", b"x"), ("a/b", b"y")],
        "dir-then-file": [("plugin.json", manifest), ("a/b", b"x"), ("a", b"y")],
        "dot": [("plugin.json", manifest), (".", b"x")],
    }
    for name, entries in cases.items():
        package = _zip(home / f"plugin-{name}.zip", entries)
        assert _error(sc, "plugins/install", {"package_path": str(package)}) == (400, "PLUGIN_PACKAGE_INVALID"), name
    assert not any((home / "data" / "plugins" / ".staging").glob("*"))
    assert sc.result("plugins/list")["items"] == []
    sc.assert_alive()


def test_theme_zip_with_a_file_and_a_folder_of_one_name_is_refused(sc: Sidecar, home: Path) -> None:
    package = _zip(home / "theme-fd.zip", [*good_files().items(), ("images/x", b"1"), ("images/x/y", b"2")])
    assert _error(sc, "themes/inspect", {"path": str(package)}) == (400, "THEME_MANIFEST_INVALID")
    css = b'body { background: -webkit-image-set("https://evil.example/x.png" 1x) }'
    package = write_zip(home / "theme-imageset.zip", {**good_files(), "theme.css": css})
    assert _error(sc, "themes/inspect", {"path": str(package)}) == (400, "THEME_CSS_UNSAFE")
    css = b"body { background: url(%2e%2e/%2e%2e/outside.png) }"  # the URL parser reads %2e%2e as ".."
    package = write_zip(home / "theme-pct.zip", {**good_files(), "theme.css": css})
    assert _error(sc, "themes/inspect", {"path": str(package)}) == (400, "THEME_RESOURCE_OUTSIDE_PACKAGE")
    sc.assert_alive()


def _req(kind: str, source: str, **kw: object) -> dict:
    return {"kind": kind, "source": source, "sourceHash": hashlib.sha256(source.encode()).hexdigest(), **kw}


def test_function_plot_yaml_alias_cycle_and_bomb_are_parse_errors(sc: Sidecar) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
    )
    for source in ("a: &a [*a]\n", laughs):
        assert _error(sc, "render/static", _req("function_plot", source)) == (400, "FUNCTION_PLOT_PARSE_FAILED")
        parsed = sc.result("render/function_plot/parse", {"source": source}, timeout=20)
        assert parsed.get("plot") is None and parsed["diagnostics"][0]["code"] == "FUNCTION_PLOT_PARSE_FAILED"
    sc.assert_alive()


def test_a_function_plot_too_expensive_to_sample_times_out(sc: Sidecar) -> None:
    heavy = "+".join(["sin(1/x)*cos(1/x)"] * 28)[:480].rsplit("+", 1)[0]
    source = "expressions:\n" + "".join(f"  - expression: '{heavy}'\n" for _ in range(16))
    started = time.monotonic()
    request = _req("function_plot", source, width=8192, height=8192)
    assert _error(sc, "render/static", request, timeout=25) == (504, "FUNCTION_PLOT_RENDER_FAILED")
    assert time.monotonic() - started < 15  # ~28 s of CPU before the deadline
    sc.assert_alive()


def test_mermaid_links_are_stripped_not_a_failed_render(sc: Sidecar) -> None:
    # review: `click A href` / sequence `links` came back as xlink:href without xmlns:xlink → MERMAID_SVG_UNSAFE
    if not sc.components["mermaid"]["available"]:  # type: ignore[attr-defined]
        pytest.skip("Mermaid is unavailable here")
    sources = [
        'flowchart LR\nA-->B\nclick A href "https://evil.example/click"',
        'sequenceDiagram\nparticipant A\nlinks A: {"x": "https://evil.example/l"}\nA->>A: hi',
    ]
    for source in sources:
        out = sc.result("render/static", _req("mermaid", source), timeout=60)
        assert_safe_svg(out["content"])
        assert "evil.example" not in out["content"]
        assert "SVG_SANITIZED: removed external or script href" in out["warnings"]


def test_a_rag_benchmark_with_an_rrf_k_too_large_for_a_float_is_refused_at_create(sc: Sidecar) -> None:
    # review: the run was accepted, then failed on OverflowError in every hybrid search
    params = {"dataset_id": "rag-core-v1", "embedder": {"kind": "hash-v1"}, "retrieval": {"rrf_k": 10**400}}
    reply = sc.call("benchmarks/rag/runs/create", params)
    assert reply.get("error", {}).get("data", {}).get("code") == "BENCHMARK_CONFIG_INVALID", reply
    assert reply["error"]["data"]["details"]["errors"][0]["field"] == "retrieval.rrf_k"


def test_event_cursors_beyond_sqlite_integers_are_invalid_params(sc: Sidecar, home: Path) -> None:
    # review: after_sequence 10**30 on an existing run/plugin was OverflowError in SQLite → INTERNAL_ERROR
    params = {
        "dataset_id": "rag-core-v1",
        "embedder": {"kind": "hash-v1"},
        "modes": ["fts"],
        "case_ids": ["rag-zh-001"],
    }
    run_id = sc.result("benchmarks/rag/runs/create", params)["run_id"]
    plugin = sc.call("plugins/install", {"package_path": str(make_plugin(home, "cursor"))}, timeout=40)["result"]
    for method, target in (
        ("benchmarks/runs/events", {"run_id": run_id}),
        ("plugins/events", {"plugin_id": plugin["plugin_id"]}),
    ):
        reply = sc.call(method, {**target, "after_sequence": 10**30})
        assert reply.get("error", {}).get("code") == -32602, (method, reply)
        assert sc.result(method, {**target, "after_sequence": 2**63 - 1})["items"] == []
    sc.call("plugins/uninstall", {"plugin_id": plugin["plugin_id"]}, timeout=20)


def test_a_tool_schema_with_a_remote_ref_fails_the_call_without_fetching(sc: Sidecar, home: Path) -> None:
    # review: jsonschema's default registry urlopen()ed the $ref on every call (network at run time), and the
    # exception failed the whole agent run with no ToolResult
    info = sc.call("plugins/install", {"package_path": str(make_plugin(home, "remote-ref", "remote-ref"))}, timeout=40)
    assert info["result"]["host"]["status"] == "ready", info
    run, results = run_agent(sc, [("c1", "remote-ref.shout", {"text": "hi"})])
    assert run["status"] == "completed", run
    assert results["c1"]["success"] is False and "cannot be resolved" in results["c1"]["error"]
    assert "urlopen" not in sc.stderr_text() and "URLError" not in sc.stderr_text()
    sc.call("plugins/uninstall", {"plugin_id": "remote-ref"}, timeout=20)


def test_a_command_schema_with_a_remote_ref_is_refused_without_fetching(sc: Sidecar, home: Path) -> None:
    # review: the manifest's command parameters were validated with jsonschema's default registry, which
    # urlopen()ed the $ref (network at run time) and failed as INTERNAL_ERROR
    command = {
        "command_id": "ref",
        "title": "Ref",
        "tool": "shout",
        "locations": ["command_palette"],
        "parameters": {"type": "object", "properties": {"text": {"$ref": "https://evil.example/p.json"}}},
    }
    folder = make_plugin(home, "cmd-ref", contributes={"commands": [command]})
    assert sc.call("plugins/install", {"package_path": str(folder)}, timeout=40)["result"]["host"]["status"] == "ready"
    reply = sc.call("plugin-contributions/commands/execute", {"command_id": "cmd-ref.ref", "arguments": {"text": "x"}})
    assert reply.get("error", {}).get("data", {}).get("code") == "PLUGIN_COMMAND_ARGUMENTS_INVALID", reply
    assert "urlopen" not in sc.stderr_text() and "URLError" not in sc.stderr_text()
    sc.call("plugins/uninstall", {"plugin_id": "cmd-ref"}, timeout=20)


def test_themes_preview_serves_the_inspected_preview(sc: Sidecar, home: Path) -> None:
    # review: documented in ipc_schema/README (the bytes behind preview_url) but never registered: METHOD_NOT_FOUND
    files = good_files()
    inspection = sc.result("themes/inspect", {"path": str(write_zip(home / "theme-preview.zip", files))})
    assert inspection["preview_url"]
    preview = sc.result("themes/preview", {"package_id": inspection["package_id"]})
    assert preview["package_id"] == inspection["package_id"] and preview["mime_type"] == "image/png"
    assert base64.b64decode(preview["data_base64"]) == files["preview.png"]
    assert _error(sc, "themes/preview", {"package_id": "theme_package_nope"}) == (404, "THEME_PACKAGE_NOT_FOUND")


def test_deeply_nested_tex_is_refused_for_svg_not_typeset_for_minutes(sc: Sidecar) -> None:
    # review: 20 nested \sqrt{ (140 characters) kept a worker thread busy for minutes; the request never answered
    tex = r"\sqrt{" * 20 + "x" + "}" * 20
    started = time.monotonic()
    assert _error(sc, "render/static", _req("math", tex, format="svg")) == (400, "MATH_PARSE_FAILED")
    assert time.monotonic() - started < 5
    mathml = sc.result("render/static", _req("math", tex, format="mathml"))
    assert mathml["mimeType"] == "application/mathml+xml"
