// Package kubeconfig turns the kubeconfig that a Cluster's Secret holds into a client
// config for its target cluster, refusing what would make the observer or convoy-api act
// with their own powers on behalf of whoever wrote the Secret.
//
// Whoever may write a Cluster and its Secret chooses the server that the kubeconfig
// points to. A kubeconfig whose user runs a command (exec, or a legacy auth-provider)
// would run that command in the observer's pod, and one that reads a file (a user's
// tokenFile, client-certificate or client-key, a cluster's certificate-authority) would
// read the pod's own files, such as its service-account token, and send what it read to
// that server. Both are refused unless the operator allows them (Options), as Flux's
// kustomize-controller refuses exec by default. A kubeconfig never chooses whom to
// impersonate (as, as-uid, as-groups, as-user-extra): the caller does. Its servers (and
// proxies) must be https URLs without user information, and, when the operator names
// an allow-list, hosts on it.
//
// The rules apply to every user, cluster and context of the file, not only to the ones
// that the current context names, so that no quirk of clientcmd's resolution (an empty
// current-context resolves to a cluster and a user named "", unchecked before) can pick
// an unchecked entry; the current context, and the cluster and the user that every
// context names, must exist. They are checked before the client config is built, because
// building it reads files (clientcmd reads a tokenFile and opens certificate files while
// it builds), and again on the built config.
//
// A refused kubeconfig is a target cluster that cannot be reached (docs/design.md, "One
// pass" step 4: an unreachable cluster stops the assessment), and the error names the
// field and the flag that would allow it; it quotes names and values only up to 100
// bytes, and never a whole server URL.
package kubeconfig

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options says what a kubeconfig may use. The zero value allows none of it: no
// command, no local file, https servers only, on any host.
type Options struct {
	// AllowExec allows an exec credential plugin or an auth-provider (flag
	// --insecure-kubeconfig-exec).
	AllowExec bool
	// AllowFiles allows what is read from the process's files: a user's tokenFile,
	// client-certificate and client-key, a cluster's certificate-authority (flag
	// --insecure-kubeconfig-files). The paths must still be absolute.
	AllowFiles bool
	// AllowedServers are the hosts that a server or a proxy-url may name (flag
	// --target-server-allowlist). Each entry is a host name or IP address ("api.example",
	// "10.0.0.1", "::1": any port), a host and port ("api.example:6443",
	// "[::1]:6443"), or a CIDR ("10.0.0.0/8"), which matches IP addresses written in the
	// URL only: no name is resolved. Host names match case-insensitively and exactly (no
	// wildcard, no trailing dot). Empty: any host.
	AllowedServers []string
	// AllowInsecureHTTP allows an http:// server (flag --insecure-target-http).
	AllowInsecureHTTP bool
}

// BindFlags defines --insecure-kubeconfig-exec, --insecure-kubeconfig-files,
// --insecure-target-http (all false by default) and --target-server-allowlist (empty
// by default: any host) on fs. convoy-observer and convoy-api bind the same flags
// through this method, so they have one name, default and meaning.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.AllowExec, "insecure-kubeconfig-exec", false,
		"let the kubeconfig Secret of a Cluster run a command in this process for credentials (exec, auth-provider)")
	fs.BoolVar(&o.AllowFiles, "insecure-kubeconfig-files", false,
		"let the kubeconfig Secret of a Cluster read this process's files (tokenFile, client-certificate, client-key, certificate-authority), such as its service-account token")
	fs.StringSliceVar(&o.AllowedServers, "target-server-allowlist", nil,
		"hosts that the server and proxy-url of a Cluster's kubeconfig Secret may name: host, host:port or CIDR (IP addresses only, no DNS lookup); repeatable or comma-separated; empty: any host")
	fs.BoolVar(&o.AllowInsecureHTTP, "insecure-target-http", false,
		"let the kubeconfig Secret of a Cluster name a plain http:// server")
}

// RESTConfig returns the client config of the current context of the kubeconfig data.
//
// It fails when the data is empty or not a kubeconfig; when an entry of AllowedServers
// is neither a host, a host:port nor a CIDR; and, naming the entry, the field and the
// flag that would allow it (if any), when any user, cluster or context of the
// kubeconfig, or the built config, does what the package documentation refuses:
//
//   - a current-context that is empty or not one of the contexts, a context naming a
//     cluster or a user that the kubeconfig does not define;
//   - exec or auth-provider, unless AllowExec;
//   - tokenFile, client-certificate, client-key or certificate-authority, unless
//     AllowFiles, and with it a relative path;
//   - as, as-uid, as-groups or as-user-extra (no flag allows them);
//   - a server that is not an https:// URL (http:// with AllowInsecureHTTP), that has
//     user information, or whose host is not in AllowedServers;
//   - a proxy-url that is not http://, https:// or socks5://, or whose host is not in
//     AllowedServers.
//
// Building the config neither reads a file nor runs a command when Options allows
// neither; it does read a tokenFile and open certificate files when AllowFiles is set.
func RESTConfig(data []byte, o Options) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("the kubeconfig is empty")
	}
	servers, err := parseAllowList(o.AllowedServers)
	if err != nil {
		return nil, err
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig cannot be read: %s", short(err.Error(), 300))
	}
	if err := checkRaw(raw, o, servers); err != nil {
		return nil, err
	}
	// Non-interactive (no prompt on stdin) and without config access: with the latter,
	// clientcmd.NewDefaultClientConfig would let an auth-provider persist its tokens
	// into the files of the default loading rules ($KUBECONFIG, ~/.kube/config).
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, nil, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig cannot be used: %s", short(err.Error(), 300))
	}
	if err := checkBuilt(cfg, o, servers); err != nil {
		return nil, err
	}
	return cfg, nil
}
