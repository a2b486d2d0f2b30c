//go:build !race

package health_test

// cpuScale stretches the CPU bound of TestEvaluationBounds (see race_on_test.go).
const cpuScale = 1
