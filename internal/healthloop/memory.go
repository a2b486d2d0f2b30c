package healthloop

import (
	"maps"

	"k8s.io/apimachinery/pkg/types"
)

// releaseMemory is everything the loop keeps in memory about one Release between passes
// (docs/design.md, "In-memory state"). Only the attempt counts are kept there by design
// (a restart loses them, and the backoff starts at 2s again); the rest is kept for speed
// or to bridge a cache that lags behind this process's own writes, and a restart that
// loses it costs at most one extra write or one extra sync request. One struct per
// Release, so forgetting a Release is one delete and a new field cannot leak.
type releaseMemory struct {
	// uid is the Release's metadata.uid once a pass has stamped it (stampMemory): a
	// Release deleted and created again under the same name is another Release, and
	// nothing remembered of the old one applies to it (forgetReplaced).
	uid types.UID
	// attempts holds the attempt count of each pending target of the re-check backoff
	// (recheck.go).
	attempts map[string]int
	// owed is what this process knows about the inventory's record of an owed sync
	// request (owed.go).
	owed owedState
	// requested is the sync annotation that this process's last sync request set (the
	// answer of /sync), until the cached Release shows it or a later one: the baseline of
	// a new record while the cache lags behind that request (owed.go, baselineFor).
	requested string
	// written is the Healthy condition this process last applied (writeHealth), which a
	// lagging cache may not show yet; nil before the first.
	written *writtenHealth
	// entriesSum is a digest of the entries this process last applied
	// (writeInventoryHealth); valid when entriesWritten.
	entriesSum     uint64
	entriesWritten bool
	// eventKind is the conditionKind of the last edge that got an Event (events.go): a
	// pass that reads the Release from a cache that has not caught up with this loop's
	// own condition write sees the old condition again, and must not record the same
	// edge twice.
	eventKind string
	// budgetCut: the last pass was cut by the evaluation budget (fair.go), so the next
	// cut one is no new edge.
	budgetCut bool
	// refused is the inventory write that the API server last refused as too large
	// (toolarge.go): passes over the same inventory read and write nothing.
	refused *refusal
}

// empty reports whether m holds nothing worth keeping (the uid alone is not).
func (m *releaseMemory) empty() bool {
	return len(m.attempts) == 0 && m.owed == (owedState{}) && m.requested == "" && m.written == nil && !m.entriesWritten &&
		m.eventKind == "" && !m.budgetCut && m.refused == nil
}

// remember runs fn on the memory of the Release key under h.mu (made on first use, and
// dropped again when fn leaves it empty).
func (h *HealthController) remember(key string, fn func(m *releaseMemory)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.memory[key]
	if m == nil {
		m = &releaseMemory{}
	}
	fn(m)
	if m.empty() {
		delete(h.memory, key)
		return
	}
	if h.memory == nil {
		h.memory = map[string]*releaseMemory{}
	}
	h.memory[key] = m
}

// recall returns a copy of the memory of the Release key (the zero value when there is
// none); the attempt counts are copied too.
func (h *HealthController) recall(key string) releaseMemory {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.memory[key]
	if m == nil {
		return releaseMemory{}
	}
	out := *m
	out.attempts = maps.Clone(m.attempts)
	return out
}

// forgetReplaced drops the memory of the Release key when it is of another Release of
// that name (deleted and created again between two passes, so that no pass saw it
// gone): the condition this process wrote, the last Event's kind, the owed record and
// the backoff are the old Release's. Then it stamps the memory with uid.
func (h *HealthController) forgetReplaced(key string, uid types.UID) {
	h.mu.Lock()
	var old types.UID
	if m := h.memory[key]; m != nil {
		old = m.uid
	}
	h.mu.Unlock()
	if old != "" && old != uid {
		h.Log.V(1).Info("the Release was created again under its name: forgetting what was remembered of the old one",
			"release", key, "uid", uid, "oldUID", old)
		h.forget(key)
	}
	h.stampMemory(key, uid)
}

// stampMemory records uid as the Release that the memory of key is of (a memory made
// during a pass is stamped when it ends).
func (h *HealthController) stampMemory(key string, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.memory[key]; m != nil {
		m.uid = uid
	}
}

// forget drops the in-memory state of the Release key: it is gone, or its shard moved
// to another replica. What the loop remembers of its Cluster goes with forgetCluster.
func (h *HealthController) forget(key string) {
	h.untrackTargets(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.memory, key)
}

// remembered counts what the loop holds in memory, per Release and per Cluster, for
// tests: after the last Release is gone both are zero. What each Release reads from its
// target is the cluster cache's (Untrack in forget).
func (h *HealthController) remembered() (releases, clusters int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(len(h.memory), len(h.clusterOf)), len(h.clusters)
}

// swapKind records kind as the conditionKind of the last edge of the Release key
// (events.go) and returns the one it replaces ("" when this process saw none).
func (h *HealthController) swapKind(key, kind string) (previous string) {
	h.remember(key, func(m *releaseMemory) { previous, m.eventKind = m.eventKind, kind })
	return previous
}
