"""The built-in themes ``light`` and ``dark``: always installed, never removable (THEME_BUILTIN_PROTECTED).
Their CSS is here (not data files) so the binary carries it without extra packaging."""

from __future__ import annotations

from .models import ThemeManifest

_BASE = """
:root { color-scheme: %(scheme)s; --bg: %(bg)s; --fg: %(fg)s; --muted: %(muted)s; --border: %(border)s;
  --link: %(link)s; --code-bg: %(code)s; }
html, body { background: var(--bg); color: var(--fg);
  font-family: "WenQuanYi Micro Hei", "Noto Sans CJK SC", "DejaVu Sans", sans-serif; line-height: 1.6; }
a { color: var(--link); }
pre, code { background: var(--code-bg); font-family: "DejaVu Sans Mono", monospace; }
blockquote { color: var(--muted); border-left: 4px solid var(--border); margin-left: 0; padding-left: 1em; }
table { border-collapse: collapse; } th, td { border: 1px solid var(--border); padding: 4px 8px; }
"""

BUILTIN = {
    "light": (
        ThemeManifest(
            theme_id="light",
            name="Light",
            version="1.0.0",
            author="Metona",
            min_app_version="0.0.0",
            is_dark=False,
            css_entry="theme.css",
            description="The default light theme.",
        ),
        _BASE
        % {
            "scheme": "light",
            "bg": "#ffffff",
            "fg": "#1f2328",
            "muted": "#57606a",
            "border": "#d0d7de",
            "link": "#0969da",
            "code": "#f6f8fa",
        },
    ),
    "dark": (
        ThemeManifest(
            theme_id="dark",
            name="Dark",
            version="1.0.0",
            author="Metona",
            min_app_version="0.0.0",
            is_dark=True,
            css_entry="theme.css",
            description="The default dark theme.",
        ),
        _BASE
        % {
            "scheme": "dark",
            "bg": "#0d1117",
            "fg": "#e6edf3",
            "muted": "#8b949e",
            "border": "#30363d",
            "link": "#4493f8",
            "code": "#161b22",
        },
    ),
}
DEFAULT_THEME = "light"
