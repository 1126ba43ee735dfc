package soak

import (
	"io"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	o, err := parse([]string{"--binary", "/bin/true"}, io.Discard)
	if err != nil || o.duration != 2*time.Minute || o.gateways != 1 || o.rate != 40 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parse([]string{"--binary", "/bin/true", "--database", "postgres://x@h/db"}, io.Discard)
	if err != nil || o.gateways != 2 {
		t.Fatalf("postgres: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--duration", "0s"}, {"--rate", "0"}, {"--database", "sqlite:x.db"}, {"extra"}} {
		if _, err := parse(append(bad, "--binary", "/bin/true"), io.Discard); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
