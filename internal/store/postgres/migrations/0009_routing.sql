-- Routing: the event type as the provider names it, and the
-- destinations a filter kept the event from. NULL on events recorded
-- before: no type, routed everywhere. Nothing here is on the ledger's leaf.
-- Adding nullable columns rewrites nothing.
ALTER TABLE events
	ADD COLUMN type text,
	ADD COLUMN not_routed text; -- destination names, comma-separated
