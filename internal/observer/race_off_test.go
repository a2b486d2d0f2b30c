//go:build !race

package observer_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
