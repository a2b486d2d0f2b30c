//go:build race

package health_test

// cpuScale and allocScale stretch the bounds of the bounds tests under the race
// detector (make test runs with -race): it makes evaluation 5 to 10 times slower, and
// its instrumentation moves values to the heap that a normal build keeps on the stack
// (the fixed seed's worst expression allocates 14 MiB normally and 108 MiB with -race). The
// plain `go test ./health/` run checks the real bounds.
const (
	cpuScale   = 10
	allocScale = 4
)
