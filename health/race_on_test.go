//go:build race

package health_test

// cpuScale stretches the CPU bound of TestEvaluationBounds: the race detector makes
// evaluation 5 to 10 times slower.
const cpuScale = 10
