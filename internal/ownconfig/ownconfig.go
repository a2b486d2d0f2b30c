// Package ownconfig loads the config of the process's own identity, the one way
// convoy-observer and convoy-api do: the kubeconfig file named by --kubeconfig, else the
// in-cluster config. (A Cluster's kubeconfig Secret, a tenant's value, is built by
// internal/kubeconfig under its refusals; convoy-api links only this package.)
package ownconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load returns the config of the kubeconfig file at path (its current context), or,
// when path is "", the in-cluster config (the pod's ServiceAccount). $KUBECONFIG and
// ~/.kube/config are not consulted, so a server started without --kubeconfig never
// picks up an operator's personal credentials. The error names what was tried.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
