-- What an attempt's request came to: not_sent (nothing was written: DNS,
-- a refused connection, TLS), no_answer (sent, then a timeout or a reset:
-- the handler may have run), answered (an HTTP status came back). Rows
-- recorded before, and attempts a rescuer closed after their worker died,
-- read unknown.
ALTER TABLE attempts ADD COLUMN outcome TEXT NOT NULL DEFAULT 'unknown';
