"""Contract tests: the shipped presets against their providers' published API documents."""
