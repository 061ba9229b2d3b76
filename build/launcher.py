"""PyInstaller entry point of the sidecar binary (dist/metona/metona-sidecar): the same as `python -m sidecar`.

With METONA_FROZEN_SELFTEST=1 in the environment it runs build/frozen_selftest.py instead, which exercises
each bundled library (lancedb, pyarrow, playwright, docx, mcp, httpx, jsonrpcserver, matplotlib) inside the binary.
The binary is a one-folder build: one process (no bootloader parent), nothing unpacked, nothing to clean up.
"""

import os
import sys

if __name__ == "__main__":
    if os.environ.get("METONA_FROZEN_SELFTEST") == "1":
        import frozen_selftest

        sys.exit(frozen_selftest.main())
    from sidecar.__main__ import main

    main()
