package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/anyhook/anyhook", Version: "v0.0.0-20261201120000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "darwin"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string // link-time
		want                  Info
	}{
		{"go run or a test: nothing recorded", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "", "",
			Info{Version: "dev", GoVersion: "go1.26.8"}},
		{"go build in a clone: what the go command recorded", vcs, "", "", "",
			Info{Version: "v0.0.0-20261201120000-0123456789ab+dirty", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-01T12:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "darwin/arm64"}},
		{"release: the link-time strings win", vcs, "v1.2.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-11-30T08:00:00Z",
			Info{Version: "v1.2.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "darwin/arm64"}},
		{"container build: no VCS, link-time strings", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "v1.2.0", "abc", "2026-11-30T08:00:00Z",
			Info{Version: "v1.2.0", Commit: "abc", Date: "2026-11-30T08:00:00Z", GoVersion: "go1.26.8"}},
		{"no build info at all", nil, "", "", "", Info{Version: "dev"}},
	}
	for _, tt := range tests {
		got := fromBuildInfo(tt.bi, tt.version, tt.commit, tt.date)
		if tt.want.GoVersion == "" {
			tt.want.GoVersion = got.GoVersion // runtime.Version()
		}
		if tt.want.Platform == "" {
			tt.want.Platform = got.Platform // runtime.GOOS/GOARCH
		}
		if got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	in := Info{Version: "v1.2.0", Commit: "0123456789abcdef0123", Date: "2026-12-01T12:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if got, want := in.String(), "anyhook v1.2.0 (0123456789ab+dirty, 2026-12-01T12:00:00Z, go1.26.8, linux/amd64)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Info{Version: "dev", GoVersion: "go1.26.8", Platform: "linux/amd64"}).String(); got != "anyhook dev (go1.26.8, linux/amd64)" {
		t.Errorf("String() = %q", got)
	}
	if v := Version(); v == "" || strings.ContainsAny(v, " \n") {
		t.Errorf("Version() = %q", v)
	}
}
