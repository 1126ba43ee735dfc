package procs

import (
	"runtime"
	"testing"
)

// TestAtLeastTwo: one P becomes two, unless GOMAXPROCS is set; more than
// one is left alone. Not parallel: GOMAXPROCS is the process's.
func TestAtLeastTwo(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	for _, c := range []struct {
		env         string
		start, want int
	}{
		{"", 1, 2},
		{"1", 1, 1},
		{"", 3, 3},
	} {
		t.Setenv("GOMAXPROCS", c.env)
		runtime.GOMAXPROCS(c.start)
		before, after := AtLeastTwo()
		if got := runtime.GOMAXPROCS(0); before != c.start || after != c.want || got != c.want {
			t.Errorf("env %q, GOMAXPROCS %d: AtLeastTwo = %d, %d, now %d; want %d", c.env, c.start, before, after, got, c.want)
		}
	}
}
