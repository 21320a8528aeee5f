-- Queries of reconciler/wakeups.py: who sent a wake-up.

-- name: wake_sender
-- The backend that sent a wake-up, if it is still there: no row when it has
-- already gone (a CLI that notified and disconnected), which says nothing of
-- who it was. `trusted`: its role may read the operations table (false for an
-- agent's session; NULL-safe for a backend with no role). `role` and
-- `backend_start` tell a pid's sessions apart: PostgreSQL reuses pids.
-- backend_start is NULL unless the reader may see the sender's session
-- details (its own role, pg_read_all_stats, a superuser).
SELECT coalesce(has_table_privilege(a.usesysid, 'public.operations', 'SELECT'), false) AS trusted,
       a.usesysid AS role, a.backend_start
FROM pg_stat_activity a
WHERE a.pid = $1;
