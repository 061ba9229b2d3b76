#!/usr/bin/env python3
"""Document import (issue 31), measured on documents nobody here wrote (the corpus of scripts/documents_corpus.py:
pypdf's and python-docx's own test files; plus any PDF, DOCX or HTML file in ``--extra DIR``), against independent
readers (Debian's ``pdftotext`` and ``pandoc -t plain``).

    .venv/bin/python scripts/bench/bench_documents.py [--extra DIR] [--no-sidecar] [--no-ocr]

Prints, per document:
* the reader alone (in this process): seconds, seconds per page, word recall against the oracle (CJK counted per
  character; pdftotext's words made of control, private-use or exotic glyphs — a broken font's text layer — are not
  asked for), the share of PDF blocks whose words are found on the page they cite, the kinds of block;
* the PDF text-layer candidates on the papers: PDFium (pypdfium2, kept) against pdfminer.six (if installed) and
  poppler's own pdftotext, seconds and recall;
* OCR: a real page rendered to an image-only PDF (200 dpi, as a scanner gives), English and Chinese, word /
  character recall against the page's own text layer, seconds per page (Tesseract, one core per process);
* end to end (unless ``--no-sidecar``): ``documents/imports/create`` → ``completed`` over stdio on a fresh
  sidecar, the note indexed for search (what the issue's < 10 s / < 15 s bars measure), and a ping's worst
  round trip while the import runs.
Wall-clock on whatever machine runs it; ``uptime``'s load is printed first (the figures are only comparable on a
quiet machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.documents.docx import read_docx  # noqa: E402
from sidecar.documents.pdf import read_pdf  # noqa: E402
from sidecar.documents.text import read_html  # noqa: E402
from tests.documents.oracle import (  # noqa: E402
    DOCXS,
    PDFS,
    on_cited_page,
    pandoc_plain,
    pdf_word_recall,
    pdftotext,
    recall,
    usable_word,
    words,
)

CORPUS_PDFS = [
    "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
    "pdflatex-outline.pdf",
    "Seige_of_Vicksburg_Sample_OCR.pdf",
    "issue-914-xmp-data.pdf",
    "crazyones.pdf",
]


def _pdf(path: Path, tmp: Path, ocr: str = "auto") -> tuple[float, object]:
    t0 = time.perf_counter()
    parsed = read_pdf(
        path, ocr_mode=ocr, languages=None, tmp_dir=tmp, max_pages=2000, page_timeout_s=120, on_page=lambda *a: None
    )
    return time.perf_counter() - t0, parsed


def readers(tmp: Path, pdfs: list[Path], others: list[Path]) -> None:
    print("\n## Readers (in process)")
    print(f"{'document':<40} {'pages':>5} {'ocr':>4} {'s':>6} {'s/page':>7} {'recall':>7} {'on page':>8}  kinds")
    for path in pdfs:
        name = path.name
        dt, parsed = _pdf(path, tmp)
        text = "\n".join(b.text for b in parsed.blocks)  # type: ignore[attr-defined]
        rec = pdf_word_recall(path, text)
        text_blocks = [(b.text, b.page) for b in parsed.blocks if b.page not in parsed.ocr_pages]  # type: ignore[attr-defined]
        cited = on_cited_page(path, text_blocks)
        kinds = dict(Counter(b.kind for b in parsed.blocks))  # type: ignore[attr-defined]
        pages = parsed.pages or 1  # type: ignore[attr-defined]
        print(
            f"{name:<40} {pages:>5} {len(parsed.ocr_pages):>4} {dt:>6.2f} {dt / pages:>7.3f} {rec:>7.3f} "  # type: ignore[attr-defined]
            f"{cited:>8.3f}  {kinds}"
        )
    for path in others:
        t0 = time.perf_counter()
        parsed = (
            read_docx(path, max_expanded_bytes=256 << 20) if path.suffix == ".docx" else read_html(path.read_bytes())
        )
        dt = time.perf_counter() - t0
        rec = recall(words(pandoc_plain(path)), words("\n".join(b.text for b in parsed.blocks)))
        kinds = dict(Counter(b.kind for b in parsed.blocks))
        print(f"{path.name:<40} {'-':>5} {'-':>4} {dt:>6.3f} {'-':>7} {rec:>7.3f} {'-':>8}  {kinds}")


def candidates(pdfs: list[Path]) -> None:
    print("\n## PDF text layer: candidates (seconds, word recall against pdftotext)")
    try:
        from pdfminer.high_level import extract_text
    except ImportError:
        extract_text = None
    import pypdfium2 as pdfium

    for path in pdfs:
        name = path.name
        t0 = time.perf_counter()
        doc = pdfium.PdfDocument(str(path))
        text = "\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
        row = [f"pypdfium2 {time.perf_counter() - t0:.2f} s {pdf_word_recall(path, text):.3f}"]
        if extract_text is not None:
            t0 = time.perf_counter()
            text = extract_text(str(path))
            row.append(f"pdfminer.six {time.perf_counter() - t0:.2f} s {pdf_word_recall(path, text):.3f}")
        else:
            row.append("pdfminer.six not installed")
        t0 = time.perf_counter()
        pdftotext(path)
        row.append(f"pdftotext (GPL, oracle) {time.perf_counter() - t0:.2f} s")
        print(f"{name:<40} " + " | ".join(row))


def scans(tmp: Path, pages: list[tuple[Path, int, bool]]) -> None:
    import pypdfium2 as pdfium

    print("\n## OCR of scanned pages (a page rendered to an image-only PDF at 200 dpi)")
    for path, page, cjk in pages:
        name = path.name
        image = pdfium.PdfDocument(str(path))[page - 1].render(scale=200 / 72, grayscale=True).to_pil()
        scan = tmp / f"scan-{name}-{page}.pdf"
        image.save(scan, "PDF", resolution=200)
        dt, parsed = _pdf(scan, tmp)
        got = words("\n".join(b.text for b in parsed.blocks))  # type: ignore[attr-defined]
        ref = [w for w in words(pdftotext(path, page)) if usable_word(w)]
        if cjk:
            ref = [w for w in ref if len(w) == 1 and "\u4e00" <= w <= "\u9fff"]
        kind = "character" if cjk else "word"
        print(f"{name} p.{page}: {dt:.2f} s, OCR pages {parsed.ocr_pages}, {kind} recall {recall(ref, got):.3f}")  # type: ignore[attr-defined]


def end_to_end(pdfs: list[Path]) -> None:
    from tests.support.sidecar_proc import Sidecar

    print("\n## End to end over stdio (create → completed, the note indexed), fresh sidecar")
    for path in pdfs:
        name, ocr = path.name, "auto"
        with tempfile.TemporaryDirectory() as d:
            data = Path(d) / "data"
            data.mkdir()
            sc = Sidecar(data, dev=False)
            try:
                sc.initialize()
                att = sc.result("attachments/import", {"path": str(path)})["attachment_id"]
                t0 = time.perf_counter()
                job = sc.result("documents/imports/create", {"attachment_id": att, "ocr": ocr})
                worst = 0.0
                while True:
                    p0 = time.perf_counter()
                    sc.result("ping", timeout=30)
                    worst = max(worst, time.perf_counter() - p0)
                    got = sc.result("documents/imports/get", {"job_id": job["job_id"]})
                    if got["status"] in ("completed", "failed", "cancelled"):
                        break
                    time.sleep(0.05)
                dt = time.perf_counter() - t0
                print(
                    f"{name:<40} {got['status']}: {dt:.1f} s, {got['pages']} pages, {len(got['ocr_pages'])} by OCR,"
                    f" {got['block_count']} blocks; worst ping {worst * 1000:.1f} ms"
                )
            finally:
                sc.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-sidecar", action="store_true")
    ap.add_argument("--no-ocr", action="store_true")
    ap.add_argument("--extra", type=Path, default=None, help="a folder of more PDF, DOCX and HTML files")
    ns = ap.parse_args()
    for tool in ("pdftotext", "pandoc"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (bash scripts/setup installs it)", file=sys.stderr)
            return 2
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    pdfs = [PDFS / n for n in CORPUS_PDFS]
    others = sorted(DOCXS.glob("*.docx"))
    debian = Path("/usr/share/doc/base-passwd/users-and-groups.html")
    others += [debian] if debian.is_file() else []
    if ns.extra is not None:
        pdfs += sorted(ns.extra.glob("*.pdf"))
        others += sorted(ns.extra.glob("*.docx")) + sorted(ns.extra.glob("*.htm*"))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        candidates(pdfs)
        readers(tmp, pdfs, others)
        if not ns.no_ocr:
            scans(
                tmp,
                [(PDFS / "pdflatex-outline.pdf", 3, False), (PDFS / "GeoBase_NHNC1_Data_Model_UML_EN.pdf", 7, False)]
                + [(p, 1, False) for p in pdfs[len(CORPUS_PDFS) :] if p.name == "tracemonkey.pdf"],
            )
    if not ns.no_sidecar:
        end_to_end(
            [PDFS / "GeoBase_NHNC1_Data_Model_UML_EN.pdf", PDFS / "issue-914-xmp-data.pdf"]
            + [p for p in pdfs[len(CORPUS_PDFS) :] if p.name in ("tracemonkey.pdf", "TAMReview.pdf")]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
