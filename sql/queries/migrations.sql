-- name: migrations_lock
SELECT pg_advisory_xact_lock($1);

-- name: migrations_create_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrations_applied
SELECT version, name, checksum FROM schema_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3);

-- name: migrations_table_exists
-- Whether table $1 exists yet: schema_migrations (a database never migrated
-- has none), or a table a pending file locks (its declared lock is taken only then).
SELECT to_regclass($1) IS NOT NULL;
