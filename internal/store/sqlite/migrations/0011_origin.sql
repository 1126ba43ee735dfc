-- Backfill: how the event reached the gateway. NULL is a
-- webhook (every event recorded before, and every one received since);
-- 'backfill' an event read from the provider's API after an outage. It is
-- on the ledger's leaf (leaf v2, docs/ledger.md) for every origin other
-- than a webhook, so a webhook's leaf is the v1 leaf it always was.
ALTER TABLE events ADD COLUMN origin TEXT;
