package postgres_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestRejectionsConformance(t *testing.T) { t.Parallel(); storetest.RunRejections(t, open) }
