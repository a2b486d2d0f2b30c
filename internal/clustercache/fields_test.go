package clustercache

import (
	"context"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	extv1alpha1 "github.com/kumodo/convoy-observer/api/extensions/v1alpha1"
	"github.com/kumodo/convoy-observer/health"
)

func configMapRules(expr string) *health.RuleFields {
	return health.FieldsOf([]extv1alpha1.GlobalHealthRuleSet{{Spec: extv1alpha1.GlobalHealthRuleSetSpec{Rules: []extv1alpha1.RuleSpec{
		{APIVersion: "v1", Resources: []string{"configmaps"}, RuleExpression: expr}}}}}, nil)
}

// TestCacheKeepsWhatRulesRead: with SetRuleFields the informers keep of an object only
// what the rules read and what the loop always reads (metadata); rules that read a
// field the cached objects lack make the informer list again, and the field is read.
func TestCacheKeepsWhatRulesRead(t *testing.T) {
	ns := namespace(t)
	configMap(t, ns, "a", "1")
	log := &requestLog{}
	cache := New(Options{Local: log.wrap(env.Config), Watch: true})
	cluster := localCluster("fields")
	key := toolscache.MetaObjectToName(cluster).String()
	reader, err := cache.GetReader(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	// Before the rules' fields are known, an informer keeps whole objects.
	cache.Track("ns/r1", cluster, []TargetRef{cmRef(ns, "a")})
	obj, err := reader.Get(context.Background(), gvrConfigMaps, ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.Object["data"]; !ok {
		t.Fatalf("cached object before SetRuleFields = %v: want it whole", obj.Object)
	}
	// Once they are, it starts again and keeps the metadata without data.
	lists0 := log.count("list") + log.count("watch")
	cache.SetRuleFields(configMapRules("true"))
	eventually(t, "the informer to list again once the rules' fields are known", func() bool {
		obj, err = reader.Get(context.Background(), gvrConfigMaps, ns, "a")
		return err == nil && obj.Object["data"] == nil && log.count("list")+log.count("watch") > lists0
	})
	if obj.GetAnnotations()["keep"] != "me" || obj.GetName() != "a" {
		t.Fatalf("cached object = %v: want its metadata", obj.Object)
	}
	lists := log.count("list") + log.count("watch")
	// A rule reads data.v now: the informer lists again and the object has it.
	cache.SetRuleFields(configMapRules("object.data.v == '1'"))
	eventually(t, "a second list (or watch) of the ConfigMaps", func() bool { return log.count("list")+log.count("watch") > lists })
	obj, err = reader.Get(context.Background(), gvrConfigMaps, ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructuredString(obj.Object, "data", "v"); v != "1" {
		t.Fatalf("after the rules read data.v, the cached object = %v", obj.Object)
	}
	if got := cache.Scopes(key); len(got) != 1 {
		t.Fatalf("scopes = %v: want the one informer, started again", got)
	}
	// Rules that read less keep the informer and its objects (no new list).
	lists = log.count("list") + log.count("watch")
	cache.SetRuleFields(configMapRules("true"))
	if d := log.count("list") + log.count("watch") - lists; d != 0 {
		t.Fatalf("%d lists after rules that read less: want none", d)
	}
	cache.Stop()
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}
