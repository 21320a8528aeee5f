"""The `jobwarden` command line: the composition root (the only code that imports the daemons)."""
