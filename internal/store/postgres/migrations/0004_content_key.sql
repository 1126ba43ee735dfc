-- The second dedup index: a hash of what the provider's signature covers
-- (plus the bounded unsigned parts the provider's content key includes).
-- An event whose dedup key is read from an unsigned header carries one, so
-- a resend of the same signed content with a fresh id header is a
-- duplicate. NULL: the event has none (its dedup key is signed, or it
-- cannot be deduplicated). Adding a nullable column rewrites nothing; the
-- index build reads the table once.
ALTER TABLE events ADD COLUMN content_key text;
CREATE UNIQUE INDEX events_content ON events (source, content_key) WHERE content_key IS NOT NULL;
