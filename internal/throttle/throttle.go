// Package throttle holds the gateway's two small limiters: a token bucket
// (the optional per-source request rate limit) and a per-address failure
// counter that slows down guessing of the admin token. Both take the time
// as an argument, so tests drive them without sleeping, and both use a
// bounded amount of memory whatever the traffic.
package throttle

import (
	"sync"
	"time"
)

// Bucket is a token bucket: Rate tokens a second, at most Burst at once.
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(rps, burst int) *Bucket {
	return &Bucket{rate: float64(rps), burst: float64(burst), tokens: float64(burst)}
}

// Allow takes one token at now. When none is left it returns false and how
// long until one is.
func (b *Bucket) Allow(now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
	return false, wait
}

// Failures counts failed attempts per key (a remote address) in a fixed
// window: after Max failures within Window of the first one, the key is
// blocked until that window ends. At most Keys keys are tracked; when the
// table is full, expired entries are dropped first, then the oldest.
type Failures struct {
	Max    int
	Window time.Duration
	Keys   int

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	start time.Time
	count int
}

// NewFailures returns a counter blocking a key after max failures within
// window, tracking at most keys keys.
func NewFailures(max int, window time.Duration, keys int) *Failures {
	return &Failures{Max: max, Window: window, Keys: keys, entries: map[string]*entry{}}
}

// Blocked reports whether key is blocked at now, and for how much longer.
func (f *Failures) Blocked(key string, now time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[key]
	if !ok {
		return 0, false
	}
	end := e.start.Add(f.Window)
	if !now.Before(end) {
		delete(f.entries, key)
		return 0, false
	}
	if e.count < f.Max {
		return 0, false
	}
	return end.Sub(now), true
}

// Fail records a failed attempt of key at now.
func (f *Failures) Fail(key string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[key]
	if ok && !now.Before(e.start.Add(f.Window)) {
		ok = false
	}
	if !ok {
		if len(f.entries) >= f.Keys {
			f.evict(now)
		}
		e = &entry{start: now}
		f.entries[key] = e
	}
	e.count++
}

// Len is the number of keys tracked.
func (f *Failures) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

// evict makes room for one key: expired entries go first, else the oldest.
func (f *Failures) evict(now time.Time) {
	var oldest string
	var oldestStart time.Time
	for k, e := range f.entries {
		if !now.Before(e.start.Add(f.Window)) {
			delete(f.entries, k)
			continue
		}
		if oldest == "" || e.start.Before(oldestStart) {
			oldest, oldestStart = k, e.start
		}
	}
	if len(f.entries) >= f.Keys && oldest != "" {
		delete(f.entries, oldest)
	}
}
