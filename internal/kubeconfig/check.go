package kubeconfig

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	execFlag     = "--insecure-kubeconfig-exec"
	filesFlag    = "--insecure-kubeconfig-files"
	httpFlag     = "--insecure-target-http"
	allowedFlag  = "--target-server-allowlist"
	maxQuoteSize = 100
)

// checkRaw refuses what the kubeconfig as written does that o does not allow, in every
// context, user and cluster (each kind in the order of their names), before anything
// is built from it.
func checkRaw(raw *clientcmdapi.Config, o Options, servers allowList) error {
	if raw.CurrentContext == "" {
		return fmt.Errorf("the kubeconfig has no current-context: set it to the context to use")
	}
	if raw.Contexts[raw.CurrentContext] == nil {
		return fmt.Errorf("the kubeconfig's current-context %s is not one of its contexts", quote(raw.CurrentContext))
	}
	for _, name := range sortedKeys(raw.Contexts) {
		ctx := raw.Contexts[name]
		if ctx == nil {
			continue
		}
		if raw.Clusters[ctx.Cluster] == nil {
			return fmt.Errorf("the kubeconfig's context %s names cluster %s, which the kubeconfig does not define", quote(name), quote(ctx.Cluster))
		}
		// No user is anonymous; a user named "" that exists is checked below like any.
		if ctx.AuthInfo != "" && raw.AuthInfos[ctx.AuthInfo] == nil {
			return fmt.Errorf("the kubeconfig's context %s names user %s, which the kubeconfig does not define", quote(name), quote(ctx.AuthInfo))
		}
	}
	for _, name := range sortedKeys(raw.AuthInfos) {
		if user := raw.AuthInfos[name]; user != nil {
			if err := checkUser(name, user, o); err != nil {
				return err
			}
		}
	}
	for _, name := range sortedKeys(raw.Clusters) {
		if cluster := raw.Clusters[name]; cluster != nil {
			if err := checkCluster(name, cluster, o, servers); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkUser refuses a user's commands and files (unless allowed) and its impersonation.
func checkUser(name string, user *clientcmdapi.AuthInfo, o Options) error {
	var refused []string
	if !o.AllowExec {
		if user.Exec != nil {
			refused = append(refused, "exec (command "+quote(user.Exec.Command)+")")
		}
		if user.AuthProvider != nil {
			refused = append(refused, "auth-provider "+quote(user.AuthProvider.Name))
		}
		if len(refused) > 0 {
			return fmt.Errorf("the kubeconfig's user %s runs a command to get credentials (%s): refused unless %s is set",
				quote(name), strings.Join(refused, ", "), execFlag)
		}
	}
	files := []namedFile{{"client-certificate", user.ClientCertificate}, {"client-key", user.ClientKey}, {"tokenFile", user.TokenFile}}
	if err := checkFiles("user "+quote(name), "credentials", "token, client-certificate-data, client-key-data", files, o); err != nil {
		return err
	}
	if user.Impersonate != "" {
		refused = append(refused, "as "+quote(user.Impersonate))
	}
	if user.ImpersonateUID != "" {
		refused = append(refused, "as-uid")
	}
	if len(user.ImpersonateGroups) > 0 {
		refused = append(refused, "as-groups")
	}
	if len(user.ImpersonateUserExtra) > 0 {
		refused = append(refused, "as-user-extra")
	}
	if len(refused) > 0 {
		return fmt.Errorf("the kubeconfig's user %s chooses whom to impersonate (%s): refused, whatever the flags (the caller chooses impersonation, not the kubeconfig)",
			quote(name), strings.Join(refused, ", "))
	}
	return nil
}

// checkCluster refuses a cluster's certificate-authority file (unless allowed), and a
// server or proxy-url that checkServer or checkProxy refuses.
func checkCluster(name string, cluster *clientcmdapi.Cluster, o Options, servers allowList) error {
	owner := "the kubeconfig's cluster " + quote(name)
	files := []namedFile{{"certificate-authority", cluster.CertificateAuthority}}
	if err := checkFiles("cluster "+quote(name), "a certificate authority", "certificate-authority-data", files, o); err != nil {
		return err
	}
	if err := checkServer(owner, cluster.Server, o, servers); err != nil {
		return err
	}
	if cluster.ProxyURL != "" {
		u, err := url.Parse(cluster.ProxyURL)
		if err != nil {
			return fmt.Errorf("%s has a proxy-url that is not a URL", owner)
		}
		if err := checkProxy(owner, u, servers); err != nil {
			return err
		}
	}
	return nil
}

type namedFile struct{ field, path string }

// checkFiles refuses the files that are named, unless o allows files; with it, the
// relative paths (a kubeconfig from a Secret has no directory of its own to resolve
// them against: they would be the process's working directory's).
func checkFiles(owner, what, inline string, files []namedFile, o Options) error {
	var named, relative []string
	for _, f := range files {
		if f.path == "" {
			continue
		}
		named = append(named, f.field+" "+quote(f.path))
		if !filepath.IsAbs(f.path) {
			relative = append(relative, f.field+" "+quote(f.path))
		}
	}
	switch {
	case len(named) > 0 && !o.AllowFiles:
		return fmt.Errorf("the kubeconfig's %s reads %s from local files (%s): put them in the kubeconfig itself (%s), or set %s",
			owner, what, strings.Join(named, ", "), inline, filesFlag)
	case len(relative) > 0:
		return fmt.Errorf("the kubeconfig's %s names local files by relative paths (%s): refused even with %s, give absolute paths",
			owner, strings.Join(relative, ", "), filesFlag)
	}
	return nil
}

// checkBuilt refuses the client config built from the kubeconfig if it has what o does
// not allow: checkRaw should have refused its origin, so this is the second line.
func checkBuilt(cfg *rest.Config, o Options, servers allowList) error {
	const owner = "the client config built from the kubeconfig"
	var refused []string
	if !o.AllowExec {
		if cfg.ExecProvider != nil {
			refused = append(refused, "an exec plugin")
		}
		if cfg.AuthProvider != nil {
			refused = append(refused, "an auth-provider")
		}
		if len(refused) > 0 {
			return fmt.Errorf("%s runs a command (%s): refused unless %s is set", owner, strings.Join(refused, ", "), execFlag)
		}
	}
	if !o.AllowFiles {
		for field, path := range map[string]string{"tokenFile": cfg.BearerTokenFile, "client-certificate": cfg.CertFile, "client-key": cfg.KeyFile, "certificate-authority": cfg.CAFile} {
			if path != "" {
				refused = append(refused, field)
			}
		}
		if len(refused) > 0 {
			slices.Sort(refused)
			return fmt.Errorf("%s reads local files (%s): refused unless %s is set", owner, strings.Join(refused, ", "), filesFlag)
		}
	}
	if imp := cfg.Impersonate; imp.UserName != "" || imp.UID != "" || len(imp.Groups) > 0 || len(imp.Extra) > 0 {
		return fmt.Errorf("%s impersonates: refused, whatever the flags (the caller chooses impersonation, not the kubeconfig)", owner)
	}
	if err := checkServer(owner, cfg.Host, o, servers); err != nil {
		return err
	}
	if cfg.Proxy != nil {
		target, err := url.Parse(cfg.Host)
		if err != nil {
			return fmt.Errorf("%s has a server that is not a URL", owner)
		}
		proxy, err := cfg.Proxy(&http.Request{Method: http.MethodGet, URL: target, Header: http.Header{}})
		if err != nil {
			return fmt.Errorf("%s has a proxy that fails: %s", owner, short(err.Error(), maxQuoteSize))
		}
		if proxy != nil {
			return checkProxy(owner, proxy, servers)
		}
	}
	return nil
}

// quote is %q of s cut to its first maxQuoteSize bytes, followed by "…" if cut.
func quote(s string) string {
	c, cutOff := cut(s, maxQuoteSize)
	if cutOff {
		return strconv.Quote(c) + "…"
	}
	return strconv.Quote(c)
}

// short is s cut to n bytes, followed by "…" if cut: for messages of other packages.
func short(s string, n int) string {
	if c, cutOff := cut(s, n); cutOff {
		return c + "…"
	}
	return s
}

// cut returns s's first n bytes, cut back to a rune boundary, and whether s was longer.
func cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
