package postgres

// SetSweepChunk makes one round of the log's sweep read n event ids.
func (s *Store) SetSweepChunk(n int) { s.sweepChunk = n }
