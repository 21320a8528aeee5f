-- 013: where the job's progress started, so the poller can forecast its end.
--
-- The reconciler predicts a job's end from the rate between this anchor (the
-- first sample of progress above zero) and what a status read brings, and
-- reads near the predicted end (reconciler/forecast.py). The anchor is kept
-- while progress grows, so the rate is measured over the longest stretch we
-- have (whole-item progress read at arbitrary moments is too coarse between
-- two consecutive reads), and set again when progress falls back (a retry
-- at the provider). Its time is the provider's updated_at when given, else
-- the read's. Working state, like progress itself: not evidence (each read's
-- observation, logged, keeps its own progress and times).
ALTER TABLE operations
    ADD COLUMN progress_anchor double precision
        CHECK (progress_anchor > 0 AND progress_anchor <= 1),
    ADD COLUMN progress_anchor_at timestamptz,
    ADD CONSTRAINT progress_anchor_whole CHECK ((progress_anchor IS NULL) = (progress_anchor_at IS NULL));

COMMENT ON COLUMN operations.progress_anchor IS
    'Share done (0..1] at the first sample of progress above zero (the poller''s forecast baseline).';
COMMENT ON COLUMN operations.progress_anchor_at IS
    'When progress_anchor was true (provider updated_at, else the read time).';
