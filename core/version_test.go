package core_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core"
)

// TestVersion_one_source: core.Version is the version's one source;
// clara.h's macros, the Makefile and the Python package agree with it.
func TestVersion_one_source(t *testing.T) {
	var major, minor, patch int
	if _, err := fmt.Sscanf(core.Version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("core.Version %q is not MAJOR.MINOR.PATCH", core.Version)
	}
	if want := major*1000000 + minor*1000 + patch; core.VersionNumber != want {
		t.Errorf("core.VersionNumber = %d, want %d", core.VersionNumber, want)
	}
	header, err := os.ReadFile("../include/clara.h")
	if err != nil {
		t.Fatal(err)
	}
	for macro, want := range map[string]string{
		"CLARA_VERSION_MAJOR": fmt.Sprint(major), "CLARA_VERSION_MINOR": fmt.Sprint(minor),
		"CLARA_VERSION_PATCH": fmt.Sprint(patch), "CLARA_VERSION": `"` + core.Version + `"`,
		"CLARA_VERSION_NUMBER": fmt.Sprint(core.VersionNumber),
	} {
		m := regexp.MustCompile(`(?m)^#define ` + macro + `\s+(\S+)`).FindSubmatch(header)
		if m == nil || string(m[1]) != want {
			t.Errorf("clara.h: %s is %q, want %s", macro, m, want)
		}
	}
	if make, err := exec.LookPath("make"); err == nil {
		out, err := exec.Command(make, "-s", "-C", "..", "print-version").Output()
		if err != nil || strings.TrimSpace(string(out)) != core.Version {
			t.Errorf("make print-version = %q (%v), want %s", out, err, core.Version)
		}
	}
	// The Python package, wherever its version is written.
	files, _ := filepath.Glob("../python/clara/*.py")
	files = append(files, "../python/pyproject.toml")
	found := false
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*(?:__version__|version)\s*=\s*"([^"]+)"`).FindAllSubmatch(text, -1) {
			found = true
			if string(m[1]) != core.Version {
				t.Errorf("%s says version %s, want %s", f, m[1], core.Version)
			}
		}
	}
	if !found && len(files) > 1 {
		t.Errorf("the Python package states no version")
	}
}
