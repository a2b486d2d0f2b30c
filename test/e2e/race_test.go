//go:build race

package e2e

// raceEnabled is true when the test runs with -race: the demo and the components it
// runs are then built with the race detector too.
const raceEnabled = true
