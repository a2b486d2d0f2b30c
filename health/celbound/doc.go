// Package celbound bounds what one evaluation of a CEL expression may spend, for the
// rules engine (package health): no rule can hurt the process (docs/rules.md, "The bound
// of one evaluation").
//
// The rule it implements:
//
//   - Every evaluation of one expression has a budget of CostLimit cost units, the API
//     server's per-call limit for validation rules (about 0.1 s of CPU and well under
//     64 MiB). A unit pays for ten bytes or one list element of work.
//   - Every library call is charged before it runs, from its arguments: their sizes,
//     and their content where the work depends on it (quantity exponents, regular
//     expression programs, nesting depth; bounds.go), so a call whose work or result
//     outgrows its inputs (replace, join, split, format, indexOf, regex, list and set
//     functions, parsers) is stopped before it starts. In an expression with
//     comprehensions, every step of every iteration is charged too. Field selections
//     and constants cost nothing, and calls whose work never depends on their arguments
//     (arithmetic, negation, optional accessors, dyn, type) are charged only as steps.
//   - An expression that would spend more than its budget stops with cel-go's cost
//     error, "operation cancelled: actual cost limit exceeded". A Meter bounds the sum
//     over a group of evaluations as well: an expression gets at most what is left of
//     the Meter's budget, and one stopped because that ran out returns
//     ErrBudgetExhausted instead.
//   - An evaluation whose context is done stops within about a millisecond, in the
//     middle of an expression too (it looks every 64 comprehension iterations, charged
//     calls or runes read by a regular expression), with an error. A panic inside an
//     evaluation is an error too, never a crash.
//
// How it is used: NewGuard takes the environment that expressions are type-checked in;
// Guard.Plan plans each checked expression with the bound; Activation.Eval runs a
// planned program on a value of the environment's one variable, within its budget.
//
// cel-go's own cost facilities cannot do this: its cost tracker charges a call after it
// returned, and its interrupts act only between comprehension iterations. So the guard
// replaces the call nodes of a program through cel-go's public decorator hook, and must
// then call the implementations itself. That leans on cel-go's interpreter package and
// on how cel-go builds its nodes; celgo.go holds those couplings and says what to check
// on every cel-go upgrade.
package celbound
