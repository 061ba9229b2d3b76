"""PyInstaller entry point for the one-file sidecar binary: the same as `python -m sidecar`.

With METONA_FROZEN_SELFTEST=1 in the environment it runs build/frozen_selftest.py instead, which exercises
each bundled library (lancedb, pyarrow, playwright, docx, mcp, httpx, jsonrpcserver) inside the binary.

One-file caveat handled here: the binary runs as two processes, the bootloader (the pid the host spawned;
it unpacks ~490 MiB into $TMPDIR/_MEIxxxxxx) and its Python child. SIGTERM to the bootloader is forwarded
and the bootloader deletes the folder after the child exits, but SIGKILL to the bootloader (or its crash)
leaves the child running until the sidecar's parent watch notices, and nobody deletes the folder. So: if
the Python process exits after its bootloader is gone, it deletes its own unpack folder first.
"""

import atexit
import os
import shutil
import sys


def _install_orphan_cleanup() -> None:
    meipass = getattr(sys, "_MEIPASS", None)
    if not getattr(sys, "frozen", False) or not meipass or os.name != "posix":
        return
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    if not os.path.basename(meipass).startswith("_MEI") or os.path.commonpath([meipass, exe_dir]) == exe_dir:
        return  # not one-file mode (one-dir keeps its files next to the executable)
    me, bootloader = os.getpid(), os.getppid()
    real_exit = os._exit

    def cleanup() -> None:
        # only in this very process (not in a forked child), and only if the bootloader is gone
        if os.getpid() == me and os.getppid() != bootloader:
            shutil.rmtree(meipass, ignore_errors=True)

    def _exit(code: int) -> None:  # the sidecar leaves through os._exit (it does not join reader threads)
        cleanup()
        real_exit(code)

    os._exit = _exit
    atexit.register(cleanup)


if __name__ == "__main__":
    _install_orphan_cleanup()
    if os.environ.get("METONA_FROZEN_SELFTEST") == "1":
        import frozen_selftest

        sys.exit(frozen_selftest.main())
    from sidecar.__main__ import main

    main()
