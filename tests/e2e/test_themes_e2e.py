"""Theme packages over real stdio: a good zip installed and enabled; the four attack packages of issue 12 refused
with their codes while the process keeps answering; built-ins protected; the enabled theme survives a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sidecar_proc import Sidecar
from tests.support.theme_packages import good_files, write_zip

pytestmark = pytest.mark.e2e


def _error(sc: Sidecar, method: str, params: dict) -> tuple[int, str]:
    reply = sc.call(method, params)
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["data"]["code"]


def test_theme_packages_over_stdio(sidecar: Sidecar, data_dir: Path, tmp_path: Path) -> None:
    sc = sidecar
    sc.initialize()
    attacks = {
        "dotdot": ({"../../outside.css": b"body{}"}, None, "THEME_RESOURCE_OUTSIDE_PACKAGE"),
        "symlink": ({}, {"images/secret": "../../../../etc/passwd"}, "THEME_RESOURCE_OUTSIDE_PACKAGE"),
        "import": ({"theme.css": b"@import url(http://evil.example/x.css);"}, None, "THEME_CSS_UNSAFE"),
        "remote": ({"theme.css": b"body { background: url(https://evil.example/p.png) }"}, None, "THEME_CSS_UNSAFE"),
    }
    for name, (files, links, code) in attacks.items():
        package = write_zip(tmp_path / f"{name}.zip", {**good_files(), **files}, symlinks=links)
        assert _error(sc, "themes/inspect", {"path": str(package)}) == (400, code), name
        sc.assert_alive()
    inspection = sc.result("themes/inspect", {"path": str(write_zip(tmp_path / "ocean.zip", good_files()))})
    assert inspection["compatible"] is True and inspection["manifest"]["theme_id"] == "ocean"
    assert set(inspection) == {"package_id", "manifest", "preview_url", "warnings", "compatible"}
    assert _error(sc, "themes/install", {"path": str(tmp_path / "ocean.zip")})[0] == -32602  # only the handle
    installed = sc.result("themes/install", {"package_id": inspection["package_id"]})
    assert installed["theme_id"] == "ocean" and installed["enabled"] is False
    assert sc.result("themes/enable", {"theme_id": "ocean"})["enabled"] is True
    assert _error(sc, "themes/uninstall", {"theme_id": "dark"}) == (403, "THEME_BUILTIN_PROTECTED")
    assert _error(sc, "themes/enable", {"theme_id": "nope"}) == (404, "THEME_NOT_FOUND")
    assert _error(sc, "themes/install", {"package_id": "theme_package_x"}) == (404, "THEME_PACKAGE_NOT_FOUND")
    sc.close()
    again = Sidecar(data_dir)
    try:
        again.initialize()
        items = again.result("themes/list")["items"]
        assert [(t["theme_id"], t["enabled"]) for t in items] == [("light", False), ("dark", False), ("ocean", True)]
        assert again.result("themes/disable", {"theme_id": "ocean"}) == {"theme_id": "ocean", "ok": True}
        assert again.result("themes/uninstall", {"theme_id": "ocean"}) == {"theme_id": "ocean", "ok": True}
        assert [t["theme_id"] for t in again.result("themes/list")["items"] if t["enabled"]] == ["light"]
    finally:
        again.close()
