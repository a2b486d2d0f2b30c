// Package kubeconfig turns the kubeconfig that a Cluster's Secret holds into a client
// config for its target cluster, refusing what would make the observer or convoy-api act
// with their own powers on behalf of whoever wrote the Secret.
//
// Whoever may write a Cluster and its Secret chooses the server that the kubeconfig
// points to. A kubeconfig whose user runs a command (exec, or a legacy auth-provider)
// would run that command in the observer's pod, and one whose user reads a file
// (tokenFile, client-certificate, client-key) would send the pod's own credentials, such
// as its service-account token, to that server. Both are refused unless the operator
// allows them (Options), as Flux's kustomize-controller refuses exec by default. A
// refused kubeconfig is a target cluster that cannot be reached (docs/design.md,
// "One pass" step 4: an unreachable cluster stops the assessment), and the error says
// which flag would allow it.
package kubeconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options says which credentials of the kubeconfig's current user are allowed.
type Options struct {
	// AllowExec allows an exec credential plugin or an auth-provider (flag
	// --insecure-kubeconfig-exec).
	AllowExec bool
	// AllowFiles allows credentials read from the process's files: tokenFile,
	// client-certificate and client-key (flag --insecure-kubeconfig-files).
	AllowFiles bool
}

// BindFlags defines --insecure-kubeconfig-exec and --insecure-kubeconfig-files on fs,
// both false by default. convoy-observer and convoy-api bind the same flags through
// this method, so they have one name, default and meaning.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.AllowExec, "insecure-kubeconfig-exec", false,
		"let the kubeconfig Secret of a Cluster run a command in this process for credentials (exec, auth-provider)")
	fs.BoolVar(&o.AllowFiles, "insecure-kubeconfig-files", false,
		"let the kubeconfig Secret of a Cluster read credentials from this process's files (tokenFile, client-certificate, client-key), such as its service-account token")
}

// RESTConfig returns the client config of the current context of the kubeconfig data.
// It fails, naming the field and the flag that would allow it, when the current user
// runs a command or reads a file that Options does not allow; and when the data is
// empty or not a kubeconfig.
func RESTConfig(data []byte, o Options) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("the kubeconfig is empty")
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	if ctx := raw.Contexts[raw.CurrentContext]; ctx != nil {
		if user := raw.AuthInfos[ctx.AuthInfo]; user != nil {
			var refused []string
			if !o.AllowExec {
				if user.Exec != nil {
					refused = append(refused, fmt.Sprintf("exec (command %q)", user.Exec.Command))
				}
				if user.AuthProvider != nil {
					refused = append(refused, fmt.Sprintf("auth-provider %q", user.AuthProvider.Name))
				}
				if len(refused) > 0 {
					return nil, fmt.Errorf("the kubeconfig's user %q runs a command to get credentials (%s): refused unless --insecure-kubeconfig-exec is set",
						ctx.AuthInfo, strings.Join(refused, ", "))
				}
			}
			if !o.AllowFiles {
				for field, file := range map[string]string{"tokenFile": user.TokenFile, "client-certificate": user.ClientCertificate, "client-key": user.ClientKey} {
					if file != "" {
						refused = append(refused, fmt.Sprintf("%s %q", field, file))
					}
				}
				slices.Sort(refused)
				if len(refused) > 0 {
					return nil, fmt.Errorf("the kubeconfig's user %q reads credentials from local files (%s): put the credentials in the kubeconfig itself (token, client-certificate-data, client-key-data), or set --insecure-kubeconfig-files",
						ctx.AuthInfo, strings.Join(refused, ", "))
				}
			}
		}
	}
	return clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
}
