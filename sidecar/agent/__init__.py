"""The agent runtime: ReAct loop, context builder + compression, tool registry, built-in tools, permissions."""
