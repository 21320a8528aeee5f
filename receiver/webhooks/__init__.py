"""Webhook intake: verify the raw bytes, extract the event, group-commit it."""
