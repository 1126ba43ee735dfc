package postgres_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestStats(t *testing.T) {
	t.Parallel()
	storetest.RunStats(t, open)
}
