//go:build race

package ingest_test

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
