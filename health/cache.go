package health

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/lru"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
)

// DefaultCacheSize is the number of distinct rule-set selections an EvaluatorCache
// keeps: far more than a cluster's Releases usually select (most use the defaults).
const DefaultCacheSize = 256

// EvaluatorCache keeps the compiled Evaluator of each selection of rule sets, so a
// steady pass of the health loop compiles nothing (docs/design.md, "Assessment"
// step 2). An entry is keyed by the identities (kind, namespace, name, uid) and
// generations of the selected sets: any change of a set's spec bumps its generation,
// which gives a new key, and the entries built from the old generation are dropped the
// first time the new one is seen. Compilation is lazy: an Evaluator is built by the
// first Get of its selection. A selection that does not compile is cached with its
// *CompileError, so it is not compiled again either until a set changes.
//
// It is safe for concurrent use. Concurrent Gets of a new selection compile it once:
// the others wait for that compilation (a cold start of the loop has every worker ask
// for the same selection at once, and compiling the whole rule library takes a large
// part of a second of CPU).
type EvaluatorCache struct {
	flight  singleflight.Group // by selection key
	mu      sync.Mutex
	entries *lru.Cache // key → *cacheEntry
	// generations is the newest generation seen of each set (kind/namespace/name/uid),
	// and keys the cache keys that use each set, so a change drops them.
	generations map[setID]setGen
	keys        map[setID]map[string]bool
	// compiles counts the compilations, for tests and metrics.
	compiles int
}

// cacheEntry is one compiled selection.
type cacheEntry struct {
	ev  *Evaluator
	err error
	ids []setID
}

// NewEvaluatorCache returns a cache of at most size selections (DefaultCacheSize when
// size < 1); the least recently used is evicted first.
func NewEvaluatorCache(size int) *EvaluatorCache {
	if size < 1 {
		size = DefaultCacheSize
	}
	c := &EvaluatorCache{generations: map[setID]setGen{}, keys: map[setID]map[string]bool{}}
	c.entries = lru.NewWithEvictionFunc(size, func(key lru.Key, value any) {
		c.forgetKey(key.(string), value.(*cacheEntry))
	})
	return c
}

// Get returns the Evaluator of the given selection (as SelectRuleSets returns it),
// compiling it on the first call, exactly as NewEvaluator would: the same order, and
// the same *CompileError when a rule does not compile.
func (c *EvaluatorCache) Get(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) (*Evaluator, error) {
	// A hit needs no bookkeeping: an entry is removed as soon as another generation of
	// one of its sets is seen, so the sets of a cached selection are at the newest
	// generations seen.
	key, _, _ := selectionKey(global, local, false)
	c.mu.Lock()
	if v, ok := c.entries.Get(key); ok {
		c.mu.Unlock()
		e := v.(*cacheEntry)
		return e.ev, e.err
	}
	_, ids, gens := selectionKey(global, local, true)
	c.dropStale(ids, gens)
	c.mu.Unlock()

	v, _, _ := c.flight.Do(key, func() (any, error) {
		return c.compile(key, ids, gens, global, local), nil
	})
	e := v.(*cacheEntry)
	return e.ev, e.err
}

// compile builds the Evaluator of a selection and stores it, unless a caller that
// started earlier stored it meanwhile.
func (c *EvaluatorCache) compile(key string, ids []setID, gens []setGen, global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet) *cacheEntry {
	c.mu.Lock()
	if v, ok := c.entries.Get(key); ok { // stored between the caller's miss and now
		c.mu.Unlock()
		return v.(*cacheEntry)
	}
	c.mu.Unlock()

	ev, err := NewEvaluator(global, local)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.compiles++
	e := &cacheEntry{ev: ev, err: err, ids: ids}
	c.dropStale(ids, gens)
	c.entries.Add(key, e)
	for _, id := range ids {
		if c.keys[id] == nil {
			c.keys[id] = map[string]bool{}
		}
		c.keys[id][key] = true
	}
	return e
}

// Compiles returns how many selections the cache has compiled so far.
func (c *EvaluatorCache) Compiles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compiles
}

// Len returns the number of cached selections.
func (c *EvaluatorCache) Len() int {
	return c.entries.Len()
}

// dropStale records the generations of the sets of a selection and removes every entry
// compiled from another generation of one of them. c.mu is held.
func (c *EvaluatorCache) dropStale(ids []setID, gens []setGen) {
	for i, id := range ids {
		old, seen := c.generations[id]
		if seen && old == gens[i] {
			continue // the steady case: nothing to write
		}
		if seen {
			for key := range c.keys[id] {
				c.entries.Remove(key) // forgetKey runs from the eviction function
			}
		}
		c.generations[id] = gens[i]
	}
}

// forgetKey unlinks an evicted or removed entry from the sets it uses. c.mu is held.
func (c *EvaluatorCache) forgetKey(key string, e *cacheEntry) {
	for _, id := range e.ids {
		delete(c.keys[id], key)
		if len(c.keys[id]) == 0 {
			// No cached selection uses the set any more: its generation goes too, so
			// rule sets created and deleted over time do not grow the cache.
			delete(c.keys, id)
			delete(c.generations, id)
		}
	}
}

// setID is the identity of a selected set: kind, namespace, name and uid.
type setID struct {
	kind, namespace, name, uid string
}

// setGen is the version of a selected set: its metadata.generation, or, for a set
// without one, text (its resourceVersion, else its rules' content).
type setGen struct {
	generation int64
	text       string
}

// selectionKey returns the cache key of a selection and, per set, its identity and
// version. The version is metadata.generation; a set without one (never stored by an API
// server) falls back to its resourceVersion, then to its rules' text, so a change is
// never missed. The key is built without quoting: every string in it is preceded by its
// length, so two different selections never share a key. It runs on every Get (every
// pass of every Release), so it costs one allocation for the key whatever the number of
// sets. With withIDs it also returns the identities and versions of the sets, in order.
func selectionKey(global []extv1alpha1.GlobalHealthRuleSet, local []extv1alpha1.HealthRuleSet, withIDs bool) (string, []setID, []setGen) {
	var ids []setID
	var gens []setGen
	if withIDs {
		n := len(global) + len(local)
		ids, gens = make([]setID, 0, n), make([]setGen, 0, n)
	}
	size := 0
	for i := range global {
		size += 48 + len(global[i].Name) + len(global[i].UID)
	}
	for i := range local {
		size += 48 + len(local[i].Namespace) + len(local[i].Name) + len(local[i].UID)
	}
	b := make([]byte, 0, size)
	str := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	add := func(kind byte, id setID, generation int64, resourceVersion string, rules []extv1alpha1.RuleSpec) {
		gen := setGen{generation: generation}
		if generation == 0 {
			gen.text = "rv" + resourceVersion
			if resourceVersion == "" {
				gen.text = "rules" + rulesText(rules)
			}
		}
		if withIDs {
			ids, gens = append(ids, id), append(gens, gen)
		}
		b = append(b, kind)
		str(id.namespace)
		str(id.name)
		str(id.uid)
		b = strconv.AppendInt(b, generation, 10)
		b = append(b, '/')
		str(gen.text)
	}
	for i := range global {
		s := &global[i]
		add('G', setID{KindGlobalHealthRuleSet, "", s.Name, string(s.UID)}, s.Generation, s.ResourceVersion, s.Spec.Rules)
	}
	for i := range local {
		s := &local[i]
		add('L', setID{KindHealthRuleSet, s.Namespace, s.Name, string(s.UID)}, s.Generation, s.ResourceVersion, s.Spec.Rules)
	}
	return string(b), ids, gens
}

// rulesText is the content of rules, for sets that have neither a generation nor a
// resourceVersion.
func rulesText(rules []extv1alpha1.RuleSpec) string {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(strconv.Quote(r.APIVersion))
		for _, res := range r.Resources {
			b.WriteString(strconv.Quote(res))
		}
		b.WriteString(strconv.Quote(r.RuleExpression))
		b.WriteString(strconv.Quote(r.MessageExpression))
		b.WriteString(strconv.Quote(r.FailedExpression))
		b.WriteByte('|')
	}
	return b.String()
}
