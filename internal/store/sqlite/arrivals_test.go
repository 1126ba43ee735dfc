package sqlite_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestArrivalsConformance(t *testing.T) { storetest.RunArrivals(t, open) }
