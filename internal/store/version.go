package store

import (
	"math/big"
	"strings"
	"time"
)

// CompareVersions orders two ordering-field values: as integers when both
// are integers (any length), as times when both are RFC 3339 timestamps,
// else byte-wise. It returns -1, 0 or +1.
func CompareVersions(a, b string) int {
	if x, ok := new(big.Int).SetString(a, 10); ok {
		if y, ok := new(big.Int).SetString(b, 10); ok {
			return x.Cmp(y)
		}
	}
	if x, err := time.Parse(time.RFC3339Nano, a); err == nil {
		if y, err := time.Parse(time.RFC3339Nano, b); err == nil {
			return x.Compare(y)
		}
	}
	return strings.Compare(a, b)
}
