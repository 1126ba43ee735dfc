-- The alert outbox (internal/alert, store.AlertOutbox; docs/design.md,
-- "Alerts"): an alert is kept until its channel took it, and the folding
-- of bursts into summaries outlives the process and holds across
-- processes.
--
-- One row per fold, (fold, destination): the window its last message
-- opened and the alerts folded since, the newest of them kept whole.
CREATE TABLE alert_folds (
	fold          text COLLATE "C" NOT NULL, -- the alert kind, or destination_health
	destination   text COLLATE "C" NOT NULL, -- '' for an alert about no destination
	opened_at     timestamptz NOT NULL,      -- the epoch: never
	pending       integer NOT NULL,          -- alerts folded since, in no message yet
	latest        bytea,                     -- the newest of them (internal/alert's JSON)
	latest_kind   text,
	latest_action text,
	latest_dedup  text,
	PRIMARY KEY (fold, destination)
);

-- The identities folded in each fold's window (the hex SHA-256 of each):
-- an exact repeat is dropped.
CREATE TABLE alert_seen (
	fold        text COLLATE "C" NOT NULL,
	destination text COLLATE "C" NOT NULL,
	identity    text COLLATE "C" NOT NULL,
	PRIMARY KEY (fold, destination, identity)
);

-- One row per message to one channel. pending until the channel answered
-- 2xx (sent) or it was given up (failed); leased while a sender posts it.
CREATE TABLE alert_outbox (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	created_at  timestamptz NOT NULL,
	channel     text COLLATE "C" NOT NULL, -- the channel's key (kind and a hash of its URL), never its URL
	fold        text COLLATE "C" NOT NULL,
	destination text COLLATE "C" NOT NULL,
	kind        text NOT NULL,
	action      text NOT NULL,             -- trigger | resolve
	dedup_key   text NOT NULL,             -- the incident's key (PagerDuty dedup_key)
	message     bytea NOT NULL,            -- the alert (internal/alert's JSON)
	more        integer NOT NULL,          -- alerts of its fold it stands for besides itself
	state       text NOT NULL,             -- pending | sent | failed
	attempts    integer NOT NULL,
	next_at     timestamptz NOT NULL,      -- due at
	lease_until timestamptz,               -- claimed by a sender until
	last_error  text,
	done_at     timestamptz                -- sent or given up at
);
CREATE INDEX alert_outbox_pending ON alert_outbox (channel, fold, destination, id) WHERE state = 'pending';
CREATE INDEX alert_outbox_done ON alert_outbox (done_at) WHERE state <> 'pending';
