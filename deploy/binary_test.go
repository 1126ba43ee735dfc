package deploy

import (
	"debug/buildinfo"
	"debug/elf"
	"testing"
)

// checkStatic checks that bin is a pure-Go build for goos/goarch without
// build paths: CGO_ENABLED=0 and -trimpath recorded, and for Linux an ELF
// with no program interpreter (no dynamic loader, no libc).
func checkStatic(t *testing.T, bin, goos, goarch string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Errorf("%s: %v", bin, err)
		return
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": goos, "GOARCH": goarch} {
		if settings[k] != want {
			t.Errorf("%s: build setting %s=%q, want %q", bin, k, settings[k], want)
		}
	}
	if goos != "linux" {
		return
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Errorf("%s: %v", bin, err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: it is not static", bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s links %v dynamically", bin, libs)
	}
}
