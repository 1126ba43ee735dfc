-- A provider event id searched without a source is looked up in each
-- source's entries of events_dedup (read.go, storedSources): this index
-- cost every ingest a page at a random place (the ids are the provider's),
-- a WAL frame of its own for each event even in a batch.
DROP INDEX IF EXISTS events_dedup_key;
