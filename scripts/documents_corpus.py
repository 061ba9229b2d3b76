#!/usr/bin/env python3
"""The document import's test corpus (issue 31): real files from two public projects' own test suites, taken from
their source distributions on PyPI (a package registry the setup may reach), never committed.

    python scripts/documents_corpus.py [--dest .cache/documents-corpus]

* pypdf 7.1.1's ``resources/`` (BSD-3-Clause, https://github.com/py-pdf/pypdf): a 19-page government data model
  (GeoBase), a 4-page pdflatex document, a scanned book with an OCR text layer (Vicksburg), a Chinese table with a
  text layer (issue-914), password-protected files;
* python-docx 1.2.0's ``features/steps/test_files/`` (MIT, https://github.com/python-openxml/python-docx): Word
  documents with styles, tables, hyperlinks, headers, comments.

The archives are pinned by sha256; a re-run with the corpus in place only checks its marker (seconds). Used by
``tests/documents``, ``tests/e2e/test_documents_e2e.py`` and ``scripts/bench/bench_documents.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "pypdf": (
        "pypdf==7.1.1",
        "pypdf-7.1.1.tar.gz",
        "2eff4e2fc5fb22a6d6711e6f1166cdc9ab5765d90cd0d77dfea3f4aa91a27b1d",
        "pypdf-7.1.1/resources/",
        (
            "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
            "pdflatex-outline.pdf",
            "Seige_of_Vicksburg_Sample_OCR.pdf",
            "issue-914-xmp-data.pdf",
            "crazyones.pdf",
            "encryption/r6-user-password.pdf",
            "encryption/r6-owner-password.pdf",
            "encryption/r4-user-password.pdf",
        ),
    ),
    "python-docx": (
        "python-docx==1.2.0",
        "python_docx-1.2.0.tar.gz",
        "7bc9d7b7d8a69c9c02ca09216118c86552704edc23bac179283f2e38f86220ce",
        "python_docx-1.2.0/features/steps/test_files/",
        None,  # every .docx there
    ),
}
MARKER = "corpus.sha256"


def _marker() -> str:
    return "\n".join(f"{name} {sha}" for name, (_, _, sha, _, _) in sorted(SOURCES.items())) + "\n"


def fetch(dest: Path) -> None:
    if (dest / MARKER).is_file() and (dest / MARKER).read_text() == _marker():
        return
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (spec, archive, sha, prefix, members) in SOURCES.items():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "--disable-pip-version-check",
                    spec,
                    "-d",
                    tmp,
                ],
                check=True,
            )
            path = Path(tmp) / archive
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != sha:
                raise SystemExit(f"documents corpus: {archive} has sha256 {digest}, expected {sha}")
            out = dest / name
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if not member.isfile() or not member.name.startswith(prefix):
                        continue
                    rel = member.name[len(prefix) :]
                    if members is None and (not rel.endswith(".docx") or "/" in rel):
                        continue
                    if members is not None and rel not in members:
                        continue
                    target = out / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tar.extractfile(member)
                    assert src is not None
                    target.write_bytes(src.read())
    (dest / MARKER).write_text(_marker())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dest", type=Path, default=ROOT / ".cache" / "documents-corpus")
    fetch(ap.parse_args().dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
