package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOnly(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Only(slog.NewTextHandler(&buf, nil), func(r slog.Record) bool { return strings.HasPrefix(r.Message, "keep") }))
	log.Info("keep: one")
	log.Info("drop: two")
	log.With("k", "v").WithGroup("g").Warn("drop: three")
	log.With("k", "v").WithGroup("g").Warn("keep: four", "x", 1)
	got := buf.String()
	if strings.Count(got, "\n") != 2 || !strings.Contains(got, "keep: one") || !strings.Contains(got, `msg="keep: four" k=v g.x=1`) || strings.Contains(got, "drop") {
		t.Errorf("logged:\n%s\nwant the two kept records, the second with its attributes", got)
	}
}
