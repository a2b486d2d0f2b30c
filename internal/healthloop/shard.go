package healthloop

import "sort"

// ShardGate tells whether this replica owns a shard (docs/design.md, "One pass"
// step 2, and "Shards"). A replica owns the shards of its --shard flags; none
// means the default shard "".
type ShardGate struct {
	shards map[string]bool
}

// NewShardGate returns a gate owning shards, or the default shard "" when there are none.
func NewShardGate(shards []string) *ShardGate {
	g := &ShardGate{shards: map[string]bool{}}
	for _, s := range shards {
		g.shards[s] = true
	}
	if len(g.shards) == 0 {
		g.shards[""] = true
	}
	return g
}

// Owns reports whether this replica owns shard.
func (g *ShardGate) Owns(shard string) bool { return g.shards[shard] }

// Shards returns the owned shards, sorted.
func (g *ShardGate) Shards() []string {
	out := make([]string, 0, len(g.shards))
	for s := range g.shards {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
