//go:build !linux

package celbound

import "time"

// processStart anchors threadCPU where no thread CPU clock is used.
var processStart = time.Now()

// threadCPU returns the wall time since the process started: without a thread CPU clock
// an evaluation's CPU time is approximated by its wall time.
func threadCPU() time.Duration { return time.Since(processStart) }
