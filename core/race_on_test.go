//go:build race

package core_test

// raceEnabled: under -race, sync.Pool drops what it is given at random and
// the detector allocates, so allocation counts mean nothing.
const raceEnabled = true
