"""Fixture servers speaking six real providers' documented shapes, for the preset tests."""
