package healthloop

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/clustercache"
)

// TestLongestReleaseName: a Release (and its inventory, entries and sync path) with the
// longest legal name, 253 characters.
func TestLongestReleaseName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.rel = strings.Repeat("r", 200) + "." + strings.Repeat("x", 52)
	f.key = f.ns + "/" + f.rel
	f.readyRelease(0, 0)
	long := strings.Repeat("c", 253)
	f.configMap(long, "true")
	f.inventory(cm(long, 0, ""))
	f.passHealthy()
	f.expectEntry(long, v1alpha1.StateHealthy, "")
	if n := f.api.syncs.Load(); n != 1 {
		t.Fatalf("sync requests for the longest name = %d, want 1", n)
	}
	if f.getRelease().Annotations[v1alpha1.SyncRequestedAtAnnotation] == "" {
		t.Fatal("the sync request did not reach the Release with the longest name")
	}
}

// TestMessagesAtTheCap: a rule message and a hook message of thousands of multi-byte
// characters are cut to 1024 characters ending in "…", stay valid UTF-8, pass the CRD's
// maxLength, and a steady pass does not rewrite them.
func TestMessagesAtTheCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.configMap("a", strings.Repeat("✗é", 1500)) // 3000 characters, 7500 bytes
	f.inventory(cm("a", 0, ""))
	f.pod("p", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: strings.Repeat("ü💥", 1000)})
	f.hooks(hook{name: "h", kind: "Pod", workload: "p", createdAt: t0.Add(-time.Minute)})
	f.pass()
	check := func(what, msg string) {
		t.Helper()
		if n := utf8.RuneCountInString(msg); n != v1alpha1.MaxMessageLength || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") {
			t.Fatalf("%s: %d characters, valid UTF-8 %v, suffix %q", what, n, utf8.ValidString(msg), msg[len(msg)-8:])
		}
	}
	check("entry message", f.entry("a").Message)
	check("hook message", f.hookEntry("h").Message)
	c := f.expectCondition(metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	if !utf8.ValidString(c.Message) || !strings.Contains(c.Message, "ready=✗é") {
		t.Fatalf("condition message %q", c.Message[:64])
	}
	rv := f.getInventory().ResourceVersion
	relRV := f.getRelease().ResourceVersion
	f.pass()
	if f.getInventory().ResourceVersion != rv || f.getRelease().ResourceVersion != relRV {
		t.Fatal("a steady pass rewrote a message at the cap")
	}
}

// largeInventory applies, as the controller-manager, an inventory of n ConfigMap entries
// (only c0 exists) and the CRD's maximum of 256 hooks (no workload exists).
func (f *fixture) largeInventory(n int) {
	f.t.Helper()
	f.h.Clusters = clustercache.New(clustercache.Options{Local: env.Config, SecretReader: env.Client, QPS: 5000, Burst: 5000})
	f.configMap("c0", "true")
	ac := acv1alpha1.ReleaseInventory(f.rel, f.ns)
	for i := range n {
		ac.WithEntries(acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace(f.ns).WithName(fmt.Sprintf("c%d", i)).
			WithVersion("v1").WithResource("configmaps").WithWave(int32(i % 3)).WithRenderRef(""))
	}
	for i := range maxHooks {
		ac.WithHooks(acv1alpha1.HookEntry().WithName(fmt.Sprintf("h%d", i)).WithWorkloadKind("Job").WithNamespace(f.ns).
			WithWorkloadName(fmt.Sprintf("j%d", i)).WithCreatedAt(metav1.NewTime(t0.Add(-time.Minute))))
	}
	must(f.t, env.Client.Apply(f.ctx, ac, client.FieldOwner(cmManager)))
}

const maxHooks = 256 // the CRD's maxItems of hooks

// TestLargeInventory: 1000 entries and the CRD's maximum of 256 hooks are assessed and
// written in one pass; the summary counts every entry.
func TestLargeInventory(t *testing.T) {
	t.Parallel()
	const entries = 1000
	f := newFixture(t)
	f.readyRelease(0, 0)
	f.largeInventory(entries)
	f.pass()
	sum := f.getRelease().Status.HealthSummary
	if sum == nil || sum.Total != entries || sum.Healthy != 1 || sum.Unknown != entries-1 {
		t.Fatalf("summary = %+v, want %d entries: 1 Healthy, the rest Unknown (object not found)", sum, entries)
	}
	inv := f.getInventory()
	if len(inv.Entries) != entries || len(inv.Hooks) != maxHooks {
		t.Fatalf("inventory has %d entries and %d hooks", len(inv.Entries), len(inv.Hooks))
	}
	for _, e := range inv.Entries {
		if e.Name != "c0" && (e.State != v1alpha1.StateUnknown || e.Message != "object not found") {
			t.Fatalf("entry %s = %s %q", e.Name, e.State, e.Message)
		}
	}
	for _, h := range inv.Hooks {
		if h.State != v1alpha1.HookFailed || h.Message != "workload not found" {
			t.Fatalf("hook %s = %s %q", h.Name, h.State, h.Message)
		}
	}
}

// TestInventoryTooLargeToAnnotate: the CRD allows 10000 entries, but etcd refuses an
// inventory of about 6000 (2 MiB with managedFields) before the observer sees it, and
// the observer's own fields push one of 3000 past etcd's request limit and one of 4000
// past the API server's gRPC message limit to etcd. Then the entries write is refused:
// the Healthy condition says why (Unknown) once, the pass returns no error for the queue
// to retry, and later passes over the same inventory read nothing again.
func TestInventoryTooLargeToAnnotate(t *testing.T) {
	if testing.Short() {
		t.Skip("7000 target reads")
	}
	t.Parallel()
	for _, n := range []int{3000, 4000} {
		f := newFixture(t)
		f.readyRelease(0, 0)
		f.largeInventory(n)
		clusters := &countingClusters{ClusterCache: f.h.Clusters}
		f.h.Clusters = clusters
		if _, err := f.h.syncHandler(f.ctx, f.key); err != nil {
			t.Fatalf("%d entries: pass = %v, want no error (said once in the condition)", n, err)
		}
		c := f.expectCondition(metav1.ConditionUnknown, v1alpha1.ReasonUnknown)
		if want := fmt.Sprintf("cannot record the health of %d entries: the ReleaseInventory exceeds the API server's size limit", n); !strings.HasPrefix(c.Message, want) {
			t.Fatalf("%d entries: condition message %q does not say why", n, c.Message)
		}
		reads := clusters.reads.Load()
		if _, err := f.h.syncHandler(f.ctx, f.key); err != nil || clusters.reads.Load() != reads {
			t.Fatalf("%d entries: the next pass = %v after %d more reads; want none", n, err, clusters.reads.Load()-reads)
		}
	}
}
