"""The human commands (``metona-sidecar bench|export|transcribe|local-model``), dispatched by ``__main__``: their
progress and errors go to stderr, their results to stdout; every service they use is built by :mod:`sidecar.wiring`.
"""
