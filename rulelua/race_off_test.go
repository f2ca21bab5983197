//go:build !race

package rulelua

const raceEnabled = false

const raceScale = 1
