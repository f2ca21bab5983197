//go:build race

package rulelua

// raceEnabled: the race detector slows the VM about tenfold, so work-bound attacks may reach
// the deadline before the limit they aim at.
const raceEnabled = true

// raceScale stretches timing margins under the race detector.
const raceScale = 10
