"""Database plumbing: finding and connecting to PostgreSQL, named queries, migrations."""
