"""The local WebSocket API: API Gateway's WebSocket front end and @connections endpoint."""
