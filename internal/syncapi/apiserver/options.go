package apiserver

import (
	"errors"
	"fmt"
	"net"

	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/kumodo/convoy-observer/internal/ownconfig"
)

// DefaultSecurePort is the HTTPS port of convoy-api (--secure-port).
const DefaultSecurePort = 8443

// Options are the command-line options of convoy-api: k8s.io/apiserver's standard
// serving, delegated authentication and delegated authorization options (as
// metrics-server takes them), plus the kubeconfig and the client limits for Releases.
// There is no option about target clusters: convoy-api never reads one.
type Options struct {
	// SecureServing: --bind-address (an IP), --secure-port, --tls-cert-file,
	// --tls-private-key-file (reloaded when the files change), --cert-dir, ….
	SecureServing *genericoptions.SecureServingOptionsWithLoopback
	// Authentication: the front-proxy CA and request-header names and the client CA,
	// read from the ConfigMap kube-system/extension-apiserver-authentication unless
	// given as flags; bearer tokens are checked with a TokenReview.
	Authentication *genericoptions.DelegatingAuthenticationOptions
	// Authorization: a SubjectAccessReview per request (cached), except for the
	// --authorization-always-allow-paths (/healthz, /readyz, /livez) and system:masters.
	Authorization *genericoptions.DelegatingAuthorizationOptions

	// Kubeconfig is the cluster of the Releases; "" means the in-cluster config. It is
	// also the default of --authentication-kubeconfig and --authorization-kubeconfig.
	Kubeconfig string
	// QPS and Burst limit the client that reads (at start and on cache misses) and
	// patches Releases: /sync is one PATCH each.
	QPS   float32
	Burst int
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		QPS:            100,
		Burst:          200,
	}
	o.SecureServing.BindPort = DefaultSecurePort
	o.SecureServing.Required = true // it serves nothing else
	o.SecureServing.ServerCert.PairName = "convoy-api"
	// No default directory: without a pair, the self-signed one stays in memory (the root
	// filesystem is read-only in the pod, and nothing should appear in the working
	// directory).
	o.SecureServing.ServerCert.CertDirectory = ""
	return o
}

// AddFlags adds the flags of all options to fss, one section per group (the sections
// of --help), as metrics-server's options do.
func (o *Options) AddFlags(fss *cliflag.NamedFlagSets) {
	fs := fss.FlagSet("management cluster")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file of the cluster that holds the Releases (default: the in-cluster config); also the default of --authentication-kubeconfig and --authorization-kubeconfig")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "queries per second of the client that patches Releases (each /sync is one PATCH); /health reads from an informer cache")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of that client")
	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Authorization.AddFlags(fss.FlagSet("authorization"))
}

// Validate returns every problem of the options.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if o.QPS <= 0 || o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %g and %d", o.QPS, o.Burst))
	}
	if (o.SecureServing.ServerCert.CertKey.CertFile == "") != (o.SecureServing.ServerCert.CertKey.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file must be given together"))
	}
	return errors.Join(errs...)
}

// Complete fills the defaults that depend on other options: the authentication and
// authorization kubeconfigs default to --kubeconfig, and without a serving certificate a
// self-signed one is generated in memory (for local use only: no caBundle can name it).
func (o *Options) Complete() error {
	if o.Kubeconfig != "" {
		if o.Authentication.RemoteKubeConfigFile == "" {
			o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
		}
		if o.Authorization.RemoteKubeConfigFile == "" {
			o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
		}
	}
	return o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")})
}

// restConfig loads --kubeconfig, or the in-cluster config without it (no
// other fallback: ownconfig.Load), with the client limits.
func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := ownconfig.Load(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "convoy-api"
	return cfg, nil
}
