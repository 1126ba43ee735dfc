-- Routing: the event type as the provider names it, and the
-- destinations a filter kept the event from. NULL on events recorded
-- before: no type, routed everywhere. Nothing here is on the ledger's leaf.
ALTER TABLE events ADD COLUMN type TEXT;
ALTER TABLE events ADD COLUMN not_routed TEXT; -- destination names, comma-separated
