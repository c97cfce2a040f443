"""The agent-facing tools (MCP): their compact schemas, argument checks, and what each does."""
