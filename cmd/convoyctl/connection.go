package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// connection is kubectl's connection flags (cli-runtime's ConfigFlags: --kubeconfig,
// --context, -n/--namespace, --server, --token, --as, --as-group, --request-timeout, …),
// bound once on the root command so that every subcommand, and convoyctl run as
// `kubectl convoy`, reaches a cluster as kubectl does: $KUBECONFIG, else
// ~/.kube/config, unless --kubeconfig names a file.
type connection struct {
	flags *genericclioptions.ConfigFlags
	names []string // the flags that choose a cluster or credentials (all but settings)
}

// settings are the connection flags that change how a cluster is reached, not which:
// alone they do not make a health command read a cluster.
var settings = map[string]bool{
	"namespace": true, "cache-dir": true, "request-timeout": true, "disable-compression": true,
	"insecure-skip-tls-verify": true, "tls-server-name": true,
}

// newConnection binds the connection flags on fs.
func newConnection(fs *pflag.FlagSet) *connection {
	// Not persistent: an auth-provider's refreshed token is not written back to the
	// kubeconfig (convoyctl only reads).
	c := &connection{flags: genericclioptions.NewConfigFlags(false)}
	own := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	c.flags.AddFlags(own)
	own.VisitAll(func(f *pflag.Flag) {
		if !settings[f.Name] {
			c.names = append(c.names, f.Name)
		}
	})
	fs.AddFlagSet(own)
	return c
}

// given reports whether a flag that chooses a cluster or its credentials was set on
// cmd: health eval, lint and coverage work on files unless one is.
func (c *connection) given(cmd *cobra.Command) bool {
	for _, name := range c.names {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return true
		}
	}
	return false
}

// validate checks the values of the connection flags that client-go would refuse only
// when a command builds its client: --request-timeout (a duration, or a number of
// seconds; not negative; 0 is none).
func (c *connection) validate() error {
	if t := c.flags.Timeout; t != nil && *t != "" {
		if d, err := clientcmd.ParseTimeout(*t); err != nil || d < 0 {
			return usageError(fmt.Errorf("invalid --request-timeout %q: a duration (1s, 2m, 3h) or a number of seconds, not negative", *t))
		}
	}
	return nil
}

// restConfig returns the client config of the flags; the error says the kubeconfig
// could not be loaded.
func (c *connection) restConfig() (*rest.Config, error) {
	// Without any kubeconfig, client-go would go to http://localhost:8080 as kubectl
	// does; say instead that there is none.
	if raw, err := c.flags.ToRawKubeConfigLoader().RawConfig(); err == nil && len(raw.Contexts) == 0 && *c.flags.APIServer == "" {
		return nil, errNoKubeconfig
	}
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// errNoKubeconfig: no kubeconfig was found and no --server given.
var errNoKubeconfig = errors.New("loading the kubeconfig: none at --kubeconfig, $KUBECONFIG or ~/.kube/config, and no --server")

// namespace returns -n, else "" (all namespaces, for the commands that list).
func (c *connection) namespace() string { return *c.flags.Namespace }

// defaultNamespace returns -n, else the namespace of the kubeconfig's context, else
// "default" (the commands that name one object).
func (c *connection) defaultNamespace() (string, error) {
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	return ns, nil
}
