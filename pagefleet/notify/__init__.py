"""Completion notifications: signed webhooks (through their own queue) and EventBridge events."""
