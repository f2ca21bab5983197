//go:build !race

package core_test

const raceEnabled = false // see race_on_test.go
