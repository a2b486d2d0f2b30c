//go:build !race

package celbound_test

// cpuScale and allocScale stretch the bounds of the bounds tests (see race_on_test.go).
const (
	cpuScale   = 1
	allocScale = 1
)
