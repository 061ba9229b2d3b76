"""Issue 21: two exports at once rendered code on two worker threads, and pygments' lazy lexer module was first
imported from both (``ImportError: cannot import name 'TextLexer'``, about one run in four). Each run here is a
fresh interpreter whose threads all render their first code block at the same moment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import threading, types
from sidecar.export.html import HtmlWriter
barrier = threading.Barrier(12, timeout=60)
errors = []

def work(i):
    node = types.SimpleNamespace(text="print(1)\\n", attributes={"language": ["python", "", "rust", "nope"][i % 4]})
    barrier.wait()
    try:  # the writer's formatter and the code's lexer: both first imported here, on 12 threads at once
        prepared = types.SimpleNamespace(document=types.SimpleNamespace(walk=lambda: [], footnotes=[]))
        writer = HtmlWriter(prepared, types.SimpleNamespace(code_theme=["github", "monokai"][i % 2]))
        writer.code(node)
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
for t in threads: t.start()
for t in threads: t.join()
print("ERRORS" if errors else "OK", errors[:1])
"""


def test_code_blocks_render_from_many_threads_on_first_use() -> None:
    for _ in range(4):
        out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.startswith("OK"), out.stdout
