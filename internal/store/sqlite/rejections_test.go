package sqlite_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestRejectionsConformance(t *testing.T) { storetest.RunRejections(t, open) }
