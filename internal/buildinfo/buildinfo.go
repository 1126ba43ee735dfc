// Package buildinfo says which build of anyhook is running: its version,
// the commit it was built from and that commit's date, the Go version and
// the platform.
//
// A release build (scripts/release.sh, the Dockerfile) stamps the three
// strings at link time:
//
//	go build -ldflags "-X github.com/anyhook/anyhook/internal/buildinfo.version=v1.2.0 \
//	    -X github.com/anyhook/anyhook/internal/buildinfo.commit=<sha> \
//	    -X github.com/anyhook/anyhook/internal/buildinfo.date=<RFC 3339>"
//
// A plain `go build` in a git clone gets them from what the go command
// records itself (debug.ReadBuildInfo: the module's pseudo-version,
// vcs.revision, vcs.time, vcs.modified); `go run` and tests get "dev".
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags -X by release builds; empty otherwise.
var (
	version string
	commit  string
	date    string
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`  // v1.2.0, a pseudo-version, or "dev"
	Commit    string `json:"commit"`   // the full commit hash, or "" when unknown
	Date      string `json:"date"`     // the commit's time, RFC 3339, or "" when unknown
	Modified  bool   `json:"modified"` // built from a tree with uncommitted changes
	GoVersion string `json:"go"`       // go1.26.8
	Platform  string `json:"platform"` // linux/amd64
}

// Read returns the running binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, commit, date)
}

// Version is Read().Version.
func Version() string { return Read().Version }

// fromBuildInfo combines the link-time strings with what the go command
// recorded; the link-time strings win, since a release build names its
// version explicitly and may be built without VCS information (a
// container build has no .git).
func fromBuildInfo(bi *debug.BuildInfo, version, commit, date string) Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if in.Version == "" {
			in.Version = "dev"
		}
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			if in.Date == "" {
				in.Date = s.Value
			}
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		in.Platform = goos + "/" + goarch
	}
	if in.Version == "" {
		// Since Go 1.24 a build in a git clone records a version derived
		// from the tag or commit: v1.2.0, or a pseudo-version such as
		// v0.0.0-20261201120000-abcdef123456 (+dirty when modified).
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		} else {
			in.Version = "dev"
		}
	}
	return in
}

// String is the one-line form: "anyhook v1.2.0 (abcdef123456, 2026-12-01T10:00:00Z, go1.26.8, linux/amd64)".
func (in Info) String() string {
	parts := []string{}
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if in.Modified {
			c += "+dirty"
		}
		parts = append(parts, c)
	}
	if in.Date != "" {
		parts = append(parts, in.Date)
	}
	parts = append(parts, in.GoVersion, in.Platform)
	return "anyhook " + in.Version + " (" + strings.Join(parts, ", ") + ")"
}
