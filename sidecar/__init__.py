"""Metona sidecar: the desktop app's AI back end over stdio JSON-RPC 2.0.

Importing this package has no side effects and imports nothing heavy.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = "1.0"
SERVER_NAME = "metona-sidecar"
