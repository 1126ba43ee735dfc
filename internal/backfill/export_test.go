package backfill

import "time"

// SetPace sets j's heartbeat and how long it may go unwritten before its
// run stops, for tests that cannot wait seconds.
func SetPace(j *Jobs, heartbeat, giveUp time.Duration) { j.beat, j.giveUp = heartbeat, giveUp }
