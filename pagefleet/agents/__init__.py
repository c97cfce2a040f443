"""The agent-facing tools (MCP): their compact schemas, argument checks, and what each does."""

# Over remote MCP (POST /v1/mcp), the longest a tool waits for a job or a step: under API
# Gateway's 29-second integration timeout, with room for the call's own work.
REMOTE_WAIT_S = 20
