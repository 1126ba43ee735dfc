package postgres_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestBackfillsConformance(t *testing.T) { t.Parallel(); storetest.RunBackfills(t, open) }
