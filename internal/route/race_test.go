//go:build race

package route

// raceEnabled: the race detector changes what is allocated (sync.Pool
// drops what it holds at random, among others).
const raceEnabled = true
