package celbound

import (
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// A field path on the variable (`object.status.replicas`, `has(object.status)` in health
// rules) is what rules do most. cel-go resolves one through an attribute, a chain of
// qualifiers and several interface calls per step; fastPath walks the object's maps
// directly, and hands every case it does not take (a missing key, a value that is not a
// map, an optional selection) back to cel-go's own node, so the results and error
// messages stay cel-go's.
// It is used in expressions without comprehensions only, where no iteration variable
// can shadow the variable.

// maxPrefixSlots is how many distinct parent paths (object.status, object.spec, ...)
// of one expression are remembered during an evaluation.
const maxPrefixSlots = 16

// prefixSlots numbers the parent paths of one expression, so fastPaths that share a
// parent (object.status.replicas, object.status.updatedReplicas) find it once per
// evaluation. One per compiled expression; used while planning only.
type prefixSlots map[string]int

// slotFor returns the slot of a parent path, or -1 when the slots are used up.
func (s prefixSlots) slotFor(parent []string) int {
	key := strings.Join(parent, "\x00")
	if n, ok := s[key]; ok {
		return n
	}
	if len(s) >= maxPrefixSlots {
		return -1
	}
	s[key] = len(s)
	return s[key]
}

// prefixCache is the per-evaluation memory of parent maps, in the activation. A slot is
// valid when its epoch is the activation's.
type prefixCache struct {
	epoch uint64
	slots [maxPrefixSlots]struct {
		epoch uint64
		m     map[string]any
	}
}

// fastPath resolves a constant field path on the variable.
type fastPath struct {
	interpreter.InterpretableAttribute               // cel-go's node, used for everything else
	path                               []string      // field names after the variable; not empty
	testOnly                           bool          // has(): presence of the last field
	adapter                            types.Adapter // converts the value found
	orig                               interpreter.InterpretableAttribute
	slot                               int // prefix cache slot of the parent path; -1 for none
}

// newFastPath returns a fastPath for i when i is an attribute of the form
// variable.f1.f2... (or has() of one) with constant field names; otherwise nil.
func newFastPath(i interpreter.InterpretableV2, slots prefixSlots, variable string) interpreter.InterpretableV2 {
	attr, ok := i.(interpreter.InterpretableAttribute)
	if !ok || attr.IsOptional() {
		return nil
	}
	ns, ok := attr.Attr().(interpreter.NamespacedAttribute)
	if !ok {
		return nil
	}
	if names := ns.CandidateVariableNames(); len(names) != 1 || names[0] != variable {
		return nil
	}
	quals := ns.Qualifiers()
	if len(quals) == 0 {
		return nil
	}
	path := make([]string, 0, len(quals))
	for _, q := range quals {
		cq, ok := q.(interpreter.ConstantQualifier)
		if !ok {
			return nil
		}
		if opt, ok := q.(interface{ IsOptional() bool }); ok && opt.IsOptional() {
			return nil
		}
		s, ok := cq.Value().(types.String)
		if !ok {
			return nil
		}
		path = append(path, string(s))
	}
	slot := -1
	if len(path) > 1 {
		slot = slots.slotFor(path[:len(path)-1])
	}
	return &fastPath{
		InterpretableAttribute: attr,
		path:                   path,
		testOnly:               isTestOnlyNode(i),
		adapter:                attr.Adapter(),
		orig:                   attr,
		slot:                   slot,
	}
}

// Exec walks the path, or leaves the evaluation to cel-go's node.
func (p *fastPath) Exec(f *interpreter.ExecutionFrame) ref.Val {
	act, ok := f.Activation.(*activation)
	if !ok {
		return p.orig.Exec(f)
	}
	last := len(p.path) - 1
	var m map[string]any
	if p.slot >= 0 && act.prefixes.slots[p.slot].epoch == act.prefixes.epoch {
		m = act.prefixes.slots[p.slot].m
	} else {
		m, ok = act.value.(map[string]any)
		if !ok {
			return p.orig.Exec(f)
		}
		for _, k := range p.path[:last] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return p.orig.Exec(f)
			}
			m = next
		}
		if p.slot >= 0 {
			act.prefixes.slots[p.slot].epoch, act.prefixes.slots[p.slot].m = act.prefixes.epoch, m
		}
	}
	v, found := m[p.path[last]]
	if p.testOnly {
		return types.Bool(found)
	}
	if !found {
		return p.orig.Exec(f)
	}
	switch t := v.(type) {
	case int64:
		return types.Int(t)
	case string:
		return types.String(t)
	case bool:
		return types.Bool(t)
	}
	return p.adapter.NativeToValue(v)
}

// Eval implements interpreter.Interpretable.
func (p *fastPath) Eval(act interpreter.Activation) ref.Val {
	return p.Exec(interpreter.AsFrame(act))
}
