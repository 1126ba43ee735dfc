-- The alert outbox (internal/alert, store.AlertOutbox; docs/design.md,
-- "Alerts"): an alert is kept until its channel took it, and the folding
-- of bursts into summaries outlives the process.
--
-- One row per fold, (fold, destination): the window its last message
-- opened and the alerts folded since, the newest of them kept whole.
CREATE TABLE alert_folds (
	fold          TEXT NOT NULL,     -- the alert kind, or destination_health
	destination   TEXT NOT NULL,     -- '' for an alert about no destination
	opened_at     INTEGER NOT NULL,  -- Unix microseconds; 0: never
	pending       INTEGER NOT NULL,  -- alerts folded since, in no message yet
	latest        BLOB,              -- the newest of them (internal/alert's JSON)
	latest_kind   TEXT,
	latest_action TEXT,
	latest_dedup  TEXT,
	PRIMARY KEY (fold, destination)
) WITHOUT ROWID;

-- The identities folded in each fold's window (the hex SHA-256 of each):
-- an exact repeat is dropped.
CREATE TABLE alert_seen (
	fold        TEXT NOT NULL,
	destination TEXT NOT NULL,
	identity    TEXT NOT NULL,
	PRIMARY KEY (fold, destination, identity)
) WITHOUT ROWID;

-- One row per message to one channel. pending until the channel answered
-- 2xx (sent) or it was given up (failed); leased while a sender posts it.
CREATE TABLE alert_outbox (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	created_at  INTEGER NOT NULL,       -- Unix microseconds
	channel     TEXT NOT NULL,          -- the channel's key (kind and a hash of its URL), never its URL
	fold        TEXT NOT NULL,
	destination TEXT NOT NULL,
	kind        TEXT NOT NULL,
	action      TEXT NOT NULL,          -- trigger | resolve
	dedup_key   TEXT NOT NULL,          -- the incident's key (PagerDuty dedup_key)
	message     BLOB NOT NULL,          -- the alert (internal/alert's JSON)
	more        INTEGER NOT NULL,       -- alerts of its fold it stands for besides itself
	state       TEXT NOT NULL,          -- pending | sent | failed
	attempts    INTEGER NOT NULL,
	next_at     INTEGER NOT NULL,       -- due at
	lease_until INTEGER,                -- claimed by a sender until
	last_error  TEXT,
	done_at     INTEGER                 -- sent or given up at
);
CREATE INDEX alert_outbox_pending ON alert_outbox (channel, fold, destination, id) WHERE state = 'pending';
CREATE INDEX alert_outbox_done ON alert_outbox (done_at) WHERE state <> 'pending';
