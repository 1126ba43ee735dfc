package postgres_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestArrivalsConformance(t *testing.T) { t.Parallel(); storetest.RunArrivals(t, open) }
