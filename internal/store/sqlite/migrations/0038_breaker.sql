-- The automatic pause (auto_pause, a circuit breaker): when a destination's
-- breaker tripped (NULL: it has not), why, and when the next probe is due.
-- Claims skip a tripped destination as they skip a paused one; only a probe
-- (Store.ClaimProbe) takes one delivery at a time.
ALTER TABLE destinations ADD COLUMN breaker_at INTEGER;
ALTER TABLE destinations ADD COLUMN breaker_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE destinations ADD COLUMN probe_at INTEGER;
-- How many of a delivery's attempts were probes: they do not count towards
-- max_attempts, so a probe never makes a delivery dead.
ALTER TABLE deliveries ADD COLUMN probes INTEGER NOT NULL DEFAULT 0;
