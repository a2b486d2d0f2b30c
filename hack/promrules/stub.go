//go:build !promrules

// Without the tag promrules this is a stub: the checker needs Prometheus' parsers, which
// come from hack/promrules/promrules.mod, not from convoy-observer's go.mod (see main.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "usage: go run -tags promrules -modfile hack/promrules/promrules.mod ./hack/promrules rules FILE | exprs")
	os.Exit(2)
}
