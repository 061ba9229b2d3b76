"""The MCP bridge: one stdio MCP server per plugin, its tools in the agent's registry (phase-2 §7.1-7.2)."""
