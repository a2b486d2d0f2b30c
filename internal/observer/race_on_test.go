//go:build race

package observer_test

// raceEnabled: the race detector makes rule evaluation 5 to 10 times slower, so
// TestNoisyTenant's short form uses a lighter team A (make test runs with -race).
const raceEnabled = true
