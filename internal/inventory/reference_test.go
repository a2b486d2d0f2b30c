package inventory

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheckReference(t *testing.T) {
	t.Parallel()
	ok := []struct {
		gvr             schema.GroupVersionResource
		namespace, name string
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "demo", "web"},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "demo", "web.v2:blue"},
		{schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1beta1", Resource: "clusterissuers"}, "", "letsencrypt"},
	}
	for _, c := range ok {
		if err := CheckReference(c.gvr, c.namespace, c.name); err != nil {
			t.Errorf("%v %s/%s: %v", c.gvr, c.namespace, c.name, err)
		}
	}
	bad := []struct {
		gvr             schema.GroupVersionResource
		namespace, name string
		want            string
	}{
		{schema.GroupVersionResource{Version: "v1"}, "demo", "web", "no version or resource"},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps/../../../namespaces"}, "demo", "web", `resource "configmaps/../../../namespaces"`},
		{schema.GroupVersionResource{Version: "v1/../v2", Resource: "configmaps"}, "demo", "web", `version "v1/../v2"`},
		{schema.GroupVersionResource{Group: "apps/..", Version: "v1", Resource: "deployments"}, "demo", "web", `group "apps/.."`},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "../kube-system", "web", `namespace "../kube-system"`},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "demo", "..", `name ".."`},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "demo", "a/b", `name "a/b"`},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "demo", "a%2F..", `name "a%2F.."`},
	}
	for _, c := range bad {
		err := CheckReference(c.gvr, c.namespace, c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %s/%s: error %v, want one naming %s", c.gvr, c.namespace, c.name, err, c.want)
		}
	}
}
