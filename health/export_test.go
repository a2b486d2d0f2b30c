package health

import "sort"

// ExposedFunctions lists the name of every function of the rules' CEL environment, for
// the audit test of functions_test.go.
func ExposedFunctions() []string {
	env, err := newEnv()
	if err != nil {
		panic(err)
	}
	var names []string
	for name := range env.compile.Functions() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
