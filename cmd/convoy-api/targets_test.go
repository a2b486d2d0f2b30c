package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	v1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1"
	acv1alpha1 "github.com/kumodo/convoy-observer/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/kumodo/convoy-observer/internal/inventory"
	syncapiclient "github.com/kumodo/convoy-observer/internal/syncapi/client"
)

// TestHealthReadsNoTarget: /health of a Release whose Cluster's kubeconfig Secret runs an
// exec plugin answers the decidedBy and rulesApplied that the observer recorded in the
// inventory, and the plugin never runs: convoy-api reads neither the Cluster, nor its
// Secret, nor any target object. Nor does it take the flags that said which
// credentials of a target kubeconfig it may use.
func TestHealthReadsNoTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ran := filepath.Join(t.TempDir(), "exec-plugin-ran")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "echo ran > %s; exit 1"]
      interactiveMode: Never
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, env.Config.Host, ran)
	const name = "exec-target"
	must(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string][]byte{"value": []byte(kc)}}))
	must(env.Client.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.ClusterSpec{KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: name}}}))
	must(env.Client.Create(ctx, &extv1alpha1.HealthRuleSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"rules": name}},
		Spec: extv1alpha1.HealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
			{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: "object.data.ready == 'true'"},
		}},
	}))
	must(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"ready": "false"}}))
	must(env.Client.Create(ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.ReleaseSpec{ClusterRef: v1alpha1.ClusterReference{Name: name},
			HealthAssessment: &v1alpha1.HealthAssessment{LocalRuleSetSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rules": name}}}},
	}))
	key := func() *acv1alpha1.InventoryEntryApplyConfiguration {
		return acv1alpha1.InventoryEntry().WithGroup("").WithKind("ConfigMap").WithNamespace("default").WithName(name)
	}
	for manager, e := range map[string]*acv1alpha1.InventoryEntryApplyConfiguration{
		"convoy-controller-manager": key().WithVersion("v1").WithResource("configmaps").WithWave(0).WithRenderRef("r1"),
		inventory.FieldManagerInventory: key().WithState(v1alpha1.StateProgressing).WithMessage("not ready").WithAssessedRenderRef("r1").
			WithRulesApplied(1).WithDecidedBy(acv1alpha1.EntryDecider().WithKind("HealthRuleSet").WithNamespace("default").
			WithName(name).WithRule(0).WithCause("RuleFailed")),
	} {
		must(env.Client.Apply(ctx, acv1alpha1.ReleaseInventory(name, "default").WithEntries(e), client.FieldOwner(manager), client.ForceOwnership))
	}

	certFile, keyFile, pool := selfSigned(t)
	addr, stop := start(t, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(freePort(t)),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile)
	defer stop()
	url := "https://" + addr.String()
	waitReady(t, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, url)
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	must(err)
	h, err := syncapiclient.NewClient(syncapiclient.DirectConfig(admin, url, certFile)).Health(ctx, "default", name)
	must(err)
	if len(h.Entries) != 1 {
		t.Fatalf("entries %+v, want one", h.Entries)
	}
	e := h.Entries[0]
	if d := e.DecidedBy; d == nil || d.Kind != "HealthRuleSet" || d.Namespace != "default" || d.Name != name || d.Rule != 0 || d.Cause != "RuleFailed" {
		t.Errorf("decidedBy = %+v, want the recorded rule 0 of HealthRuleSet default/%s, RuleFailed", d, name)
	}
	if e.RulesApplied == nil || *e.RulesApplied != 1 || h.DecidedByError != "" {
		t.Errorf("rulesApplied = %v, decidedByError %q; want the recorded 1 and none", e.RulesApplied, h.DecidedByError)
	}
	time.Sleep(200 * time.Millisecond) // a plugin started by the request would have written by now
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the Cluster's exec plugin ran (%s: %v): convoy-api built a client from a tenant's kubeconfig", ran, err)
	}

	for _, flag := range []string{"--insecure-kubeconfig-exec", "--insecure-kubeconfig-files"} {
		var stderr bytes.Buffer
		if code := run(ctx, []string{flag}, &stderr, nil); code != exitUsage || !strings.Contains(stderr.String(), "unknown flag") {
			t.Errorf("%s: exit %d, stderr %q; want a usage error: convoy-api takes no target kubeconfig", flag, code, stderr.String())
		}
	}
}

// TestNoTargetClientInTheBinary: nothing that reaches a target cluster, reads a
// kubeconfig Secret or lists rule sets is linked into convoy-api.
func TestNoTargetClientInTheBinary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range []string{"internal/clustercache", "internal/kubeconfig", "internal/healthloop"} {
		for _, d := range deps {
			if d == "github.com/kumodo/convoy-observer/"+pkg {
				t.Errorf("convoy-api imports %s", d)
			}
		}
	}
}
