"""render/static over real stdio: Mermaid (Chinese labels) in the warm browser, function plots, TeX maths;
screenshots of the SVGs through Chromium; the cache; malicious inputs; the browser restarted after a crash and
gone after shutdown and after a kill -9. One sidecar (so one browser) for the module."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.render_check import assert_safe_svg, req, text_of
from tests.support.sidecar_proc import ROOT, Sidecar

pytestmark = pytest.mark.e2e

SLOW = 90.0
FLOWCHART = "flowchart TD\n  A[开始] --> B{是否登录}\n  B -->|是| C[进入首页]\n  B -->|否| D[登录页面]\n  D --> B"
SEQUENCE = (
    "sequenceDiagram\n  participant 用户\n  participant 服务器\n  用户->>服务器: 发送请求\n  服务器-->>用户: 返回结果"
)
PLOT = """expressions:
  - expression: sin(x)
    label: 正弦
  - x^2/4
  - tan(x)
domain: [-6, 6]
range: [-4, 4]
axes:
  xLabel: x
  yLabel: y
  grid: true
"""
SCREENS = ROOT / "build" / "render-screens"


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("render") / "data"
    data.mkdir()
    proc = Sidecar(data)
    proc.components = proc.initialize()["capabilities"]["components"]  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.close()


def _render(sc: Sidecar, kind: str, source: str, **kw: Any) -> dict[str, Any]:
    return sc.result("render/static", req(kind, source, **kw), timeout=SLOW)


def _error(sc: Sidecar, params: dict[str, Any]) -> dict[str, Any]:
    reply = sc.call("render/static", params, timeout=SLOW)
    assert "error" in reply, reply
    return reply["error"]


def _components(sc: Sidecar) -> dict[str, Any]:
    return sc.result("initialize", {"client_info": {"name": "pytest"}})["capabilities"]["components"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def mermaid_on(sc: Sidecar) -> bool:
    """What ``initialize`` reports; when it says unavailable, the first test checks the error code instead."""
    return bool(sc.components["mermaid"]["available"])  # type: ignore[attr-defined]


def test_diagrams_plot_and_math_render_to_svg_and_screenshots(sc: Sidecar, mermaid_on: bool) -> None:
    rendered: dict[str, dict[str, Any]] = {}
    if mermaid_on:
        rendered["flowchart"] = _render(sc, "mermaid", FLOWCHART)
        rendered["sequence"] = _render(sc, "mermaid", SEQUENCE, theme="dark")
        for name, source_words in (
            ("flowchart", ["开始", "是否登录", "进入首页"]),
            ("sequence", ["用户", "服务器", "发送请求"]),
        ):
            root = assert_safe_svg(rendered[name]["content"])
            for word in source_words:
                assert word in text_of(root), (name, word)
    else:
        err = _error(sc, req("mermaid", FLOWCHART))
        assert (err["code"], err["data"]["code"]) == (503, "RENDERER_UNAVAILABLE")
    rendered["plot"] = _render(sc, "function_plot", PLOT, width=640, height=400)
    rendered["math"] = _render(sc, "math", "$e^{i\\pi}+1=0$")
    plot_root = assert_safe_svg(rendered["plot"]["content"])
    assert "正弦" in text_of(plot_root) and "tan(x)" in text_of(plot_root)
    assert (rendered["plot"]["width"], rendered["plot"]["height"]) == (640, 400)
    assert_safe_svg(rendered["math"]["content"])
    for result in rendered.values():
        assert result["mimeType"] == "image/svg+xml"
        assert result["width"] > 0 and result["height"] > 0
    mathml = _render(sc, "math", "$e^{i\\pi}+1=0$", format="mathml")
    assert mathml["mimeType"] == "application/mathml+xml" and "<msup>" in mathml["content"]
    _screenshot(rendered)


def _screenshot(rendered: dict[str, dict[str, Any]]) -> None:
    """Each SVG through Chromium to PNG (build/render-screens/); the PNG has ink, CJK text uses a real CJK font."""
    pytest.importorskip("playwright")
    from PIL import Image
    from playwright.sync_api import sync_playwright

    SCREENS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            assert page.evaluate("() => document.fonts.check('16px \"WenQuanYi Micro Hei\"', '开始')")
            for name, result in rendered.items():
                page.set_content(f"<html><body style='margin:0;background:#fff'>{result['content']}</body></html>")
                out = SCREENS / f"{name}.png"
                page.query_selector("svg").screenshot(path=str(out))
                with Image.open(out) as img:
                    colours = img.convert("RGB").getcolors(1 << 20) or []
                assert len(colours) > 20, (name, len(colours))  # anti-aliased text and curves, not a blank box
        finally:
            browser.close()


def test_the_same_request_twice_is_served_from_the_cache(sc: Sidecar, mermaid_on: bool) -> None:
    kind, source = ("mermaid", FLOWCHART + "\n  C --> E[缓存]") if mermaid_on else ("function_plot", PLOT + "# c\n")
    before = sc.result("render/stats")["cache"]
    first = _render(sc, kind, source)
    second = _render(sc, kind, source)
    after = sc.result("render/stats")["cache"]
    assert first == second
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"] + 1
    assert after["entries"] == before["entries"] + 1
    other_theme = _render(sc, kind, source, theme="dark")
    assert other_theme["content"] != first["content"]


def test_malicious_mermaid_is_neutralised(sc: Sidecar, mermaid_on: bool) -> None:
    if not mermaid_on:
        pytest.skip("Mermaid is reported unavailable on this build (checked in the first test)")
    source = (
        'flowchart TD\n  A["<img src=x onerror=alert(1)>"] --> B["<script>alert(2)</script>"]\n'
        '  B --> C[ok]\n  click A "javascript:alert(3)"\n  click C href "javascript:alert(4)"'
    )
    result = _render(sc, "mermaid", source)
    assert_safe_svg(result["content"])
    assert sc.result("render/stats")["browser"]["blockedRequests"] == 0  # nothing even tried the network
    err = _error(sc, req("mermaid", "flowchart TD\n  A --> B\n  B -- C"))
    assert (err["code"], err["data"]["code"]) == (400, "MERMAID_PARSE_FAILED")
    assert err["data"]["details"]["line"] == 3
    sc.assert_alive()


def test_a_request_to_the_network_is_aborted_and_the_css_removed(sc: Sidecar, mermaid_on: bool) -> None:
    if not mermaid_on:
        pytest.skip("Mermaid is reported unavailable on this build")
    before = sc.result("render/stats")["browser"]["blockedRequests"]
    theme_css = "@import url(http://evil.example/x.css); .node rect { fill: url(https://evil.example/a.png) }"
    source = '%%{init: {"themeCSS": "' + theme_css + '"}}%%\nflowchart TD\n  A --> B'
    result = _render(sc, "mermaid", source)
    assert_safe_svg(result["content"])
    assert "evil.example" not in result["content"]
    assert "SVG_SANITIZED: removed external url() references" in result["warnings"]
    assert sc.result("render/stats")["browser"]["blockedRequests"] > before  # the page tried; the route aborted it


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ("__import__('os')", "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("x.__class__", "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("(lambda: 1)()", "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("x" + "+x" * 50_000, "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("9^9^9^9", "FUNCTION_PLOT_EXPRESSION_UNSAFE"),
        ("sin(x", "FUNCTION_PLOT_PARSE_FAILED"),
    ],
)
def test_malicious_plot_expressions_are_refused_with_their_codes(sc: Sidecar, expression: str, code: str) -> None:
    source = (
        f"expressions:\n  - expression: {expression!r}\n"
        if "'" not in expression
        else (f'expressions:\n  - expression: "{expression}"\n')
    )
    err = _error(sc, req("function_plot", source))
    assert (err["code"], err["data"]["code"]) == (400, code)
    assert err["data"]["details"]["line"] == 2 and err["data"]["details"]["column"] >= 17
    sc.assert_alive()


def test_bad_requests(sc: Sidecar) -> None:
    bad_hash = {**req("function_plot", PLOT), "sourceHash": "0" * 64}
    err = _error(sc, bad_hash)
    assert (err["code"], err["data"]["code"]) == (400, "EXPORT_OPTIONS_INVALID")
    err = _error(sc, {**req("function_plot", PLOT), "kind": "plantuml"})
    assert err["code"] == -32602
    err = _error(sc, req("math", "\\frac{1}{"))
    assert (err["code"], err["data"]["code"]) == (400, "MATH_PARSE_FAILED")
    parsed = sc.result("render/function_plot/parse", {"source": "expressions:\n  - sin(x) + foo\n"})
    assert parsed == {
        "diagnostics": [
            {
                "severity": "error",
                "code": "FUNCTION_PLOT_EXPRESSION_UNSAFE",
                "message": parsed["diagnostics"][0]["message"],
                "line": 2,
                "column": 14,
            }
        ]
    }


def test_a_crashed_browser_is_restarted_and_shutdown_leaves_no_browser(sc: Sidecar, mermaid_on: bool) -> None:
    if not mermaid_on:
        pytest.skip("Mermaid is reported unavailable on this build")
    _render(sc, "mermaid", "flowchart LR\n  X --> Y")
    stats = sc.result("render/stats")["browser"]
    pid, launches = stats["pid"], stats["launches"]
    assert pid and stats["running"]
    os.killpg(pid, signal.SIGKILL)
    assert _wait_gone(pid)
    again = _render(sc, "mermaid", "flowchart LR\n  X --> Z[重启后]")
    assert "重启后" in text_of(assert_safe_svg(again["content"]))
    stats = sc.result("render/stats")["browser"]
    assert stats["launches"] == launches + 1 and stats["pid"] != pid
    new_pid = stats["pid"]
    assert sc.result("shutdown") is None
    sc.notify("exit")
    assert sc.wait(20) == 0
    assert _wait_gone(new_pid, 10)


def test_kill_9_of_the_sidecar_leaves_no_browser(data_dir: Path) -> None:
    proc = Sidecar(data_dir)
    try:
        comps = _components(proc)
        if not comps["mermaid"]["available"]:
            pytest.skip("Mermaid is reported unavailable on this build")
        proc.result("render/static", req("mermaid", "flowchart LR\n  K --> L"), timeout=SLOW)
        pid = proc.result("render/stats")["browser"]["pid"]
        assert pid and _alive(pid)
        proc.kill_9()
        assert _wait_gone(pid, 20), "Chromium outlived a SIGKILLed sidecar"
    finally:
        proc.close()
