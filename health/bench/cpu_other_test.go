//go:build !unix

package bench

import "time"

// processCPUSource says what processCPU measures.
const processCPUSource = "wall time (no process CPU clock here), fastest of 5 interleaved rounds of 300"

// start anchors processCPU.
var start = time.Now()

// processCPU returns the wall time since the package started: without a process CPU
// clock, the passes are timed by the wall clock.
func processCPU() time.Duration { return time.Since(start) }
