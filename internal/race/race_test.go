package race

import (
	"runtime/debug"
	"testing"
)

// The build tags and the toolchain's own record of the build must agree: a constant wired
// to the wrong tag would let allocation tests run under the detector and fail, or skip them
// in every build.
func TestEnabledMatchesTheBuild(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("the test binary carries no build information")
	}
	built := false
	for _, s := range info.Settings {
		if s.Key == "-race" {
			built = s.Value == "true"
		}
	}
	if Enabled != built {
		t.Fatalf("race.Enabled = %v, but the binary was built with -race=%v", Enabled, built)
	}
}
