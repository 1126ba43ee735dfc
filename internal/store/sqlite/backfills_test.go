package sqlite_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestBackfillsConformance(t *testing.T) { storetest.RunBackfills(t, open) }
