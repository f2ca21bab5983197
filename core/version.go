package core

// The library's version. This is its one source: the Makefile reads it from
// here, and version_test.go fails when include/clara.h or the Python
// package say otherwise.
const (
	Version       = "0.2.0"
	VersionNumber = 2000 // major*1000000 + minor*1000 + patch
)
