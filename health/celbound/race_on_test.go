//go:build race

package celbound_test

// cpuScale and allocScale stretch the bounds of the bounds tests under the race
// detector (make test runs with -race): it makes evaluation 5 to 10 times slower, and
// its instrumentation moves values to the heap that a normal build keeps on the stack
// (the fixed seed's worst expression allocates 14 MiB normally and 108 MiB with -race;
// findAll over a 1 MB string, 40 and 231 MiB). Under -race the CPU bound is only a
// ceiling against an evaluation that runs away: the detector's cost doubles on a busy
// machine (findAll: 1.0 s CPU idle, 2.2 s under CI's load), so a tighter bound fails with
// nothing wrong. The plain `go test ./health/celbound/` run checks the real bounds.
const (
	cpuScale   = 30
	allocScale = 4
)
