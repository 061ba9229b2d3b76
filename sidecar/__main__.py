"""``python -m sidecar`` / ``metona-sidecar``: argv → Settings, logs → stderr, serve stdio."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["bench"]:  # a human CLI: its module loads only for this subcommand
        from .cli.bench import main as bench_main

        sys.exit(bench_main(args[1:]))
    if args and args[0] == "transcribe":  # a CLI for people over the media service (lazily imported)
        from .cli.transcribe import main as transcribe

        raise SystemExit(transcribe(args[1:]))
    if args[:1] == ["export"]:  # a human CLI: Markdown/a note → html|pdf|docx with a progress bar
        from .cli.export import main as export_main

        sys.exit(export_main(args[1:]))
    if args[:1] == ["demo"]:  # the acceptance chain over stdio (issue 20); loads only for this subcommand
        from .cli.demo import main as demo_main

        sys.exit(demo_main(args[1:]))
    if args[:1] == ["math-worker"]:  # TeX → SVG in a killable child (issue 21): the frozen binary's entry
        from .render.mathworker import main as math_main

        math_main()
        sys.exit(0)
    if args[:1] == ["export-worker"]:  # an export's parse and writers in a child (issue 22): the binary's entry
        from .export.worker import main as export_worker_main

        export_worker_main()
        sys.exit(0)
    if args[:1] == ["document-worker"]:  # a document's parsers in a killable child (issue 31): the binary's entry
        from .documents.worker import main as document_worker_main

        document_worker_main()
        sys.exit(0)
    if args[:1] == ["import"]:  # a human CLI: a PDF, DOCX, HTML, Markdown or text file → a cited note
        from .cli.importdoc import main as import_main

        sys.exit(import_main(args[1:]))
    if args[:1] == ["local-model"]:  # prepare the embedded model once (issue 15); loads only for this subcommand
        from .cli.local_model import main as local_main

        sys.exit(local_main(args[1:]))
    from .core.settings import parse_args, prepare_data_dir

    settings = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub (ARCHITECTURE.md §8)
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Answer `initialize` before anything else is imported (issue 22): the event loop, logging and the domain
    # layer load after the answer (sidecar.ipc.early says how; the dispatcher serves whatever it did not answer).
    from .ipc.early import answer_first, claim_stdio, exit_quietly
    from .system.capabilities import server_info

    stdio = claim_stdio()
    prepare_data_dir(settings)
    first = answer_first(*stdio, server_info(settings), on_stop=exit_quietly)
    import logging

    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, settings.log_level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from .core.redact import redact_logs

    redact_logs()  # every log line goes through the one redaction (issue 21)
    from .app import run

    code = run(settings, stdio, first)
    logging.shutdown()
    # A host that died (a SIGKILLed app) took our stderr's reader along: what is still buffered cannot be written,
    # and that must not skip os._exit (the interpreter's own finalization then ran for 1-2 s and exited 120).
    try:
        sys.stderr.flush()
    except OSError:
        pass
    # Worker threads may still sit in a blocking read of the host's pipe: leave without joining them.
    os._exit(code)


if __name__ == "__main__":
    main()
