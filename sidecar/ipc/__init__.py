"""JSON-RPC 2.0 over newline-delimited stdio. Knows no domain."""
