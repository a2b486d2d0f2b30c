package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the observer's GOGC unless the environment sets one. Its memory is
// mostly caches (Releases, inventories, the recorded target objects) and its CPU mostly
// waits on API servers, so the garbage collector lets the heap grow by half of what is
// live between collections instead of all of it: a smaller resident set (and peak at a
// cold start) for a little more CPU (docs/operations.md, "Scaling and sizing").
const defaultGCPercent = 50

func init() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
