// Package bench holds the side-by-side benchmarks of `make bench` (README, "Benchmarks"):
// the project's rule evaluator against kstatus.Compute (sigs.k8s.io/cli-utils) and a
// hand-written Go check of the same rule, on the same objects in one run, and the cost
// of one health-loop pass over a 100-entry Release with cached rules. It has no
// non-test code; kstatus is imported by the tests only.
package bench
