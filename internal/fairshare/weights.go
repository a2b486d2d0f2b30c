package fairshare

import (
	"context"
	"math"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceWeights returns the weight of each namespace from the value of its label
// (a positive number, at most 1000; anything else, or no label, is 1), read from
// the Namespaces' metadata in reader (the manager's cache; New starts its informer, so a
// read never waits for a first list).
func NamespaceWeights(ctx context.Context, reader client.Reader, label string) func(string) float64 {
	return func(namespace string) float64 {
		ns := NamespaceMetadata()
		if err := reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
			return 1
		}
		return ParseWeight(ns.Labels[label])
	}
}

// NamespaceMetadata is an empty Namespace metadata object, for the cache.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	return ns
}

// ParseWeight reads a namespace weight: a positive number up to 1000; anything else
// (empty, not a number, 0, negative, NaN) is 1.
func ParseWeight(v string) float64 {
	w, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(w) || w <= 0 {
		return 1
	}
	return min(w, 1000)
}
