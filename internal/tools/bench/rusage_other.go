//go:build !unix

package bench

import "time"

// usage is not measured on this system.
func usage() (cpu time.Duration, maxRSS int64) { return 0, 0 }
