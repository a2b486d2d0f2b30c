package kubeconfig

import (
	"net/url"
	"testing"
)

// FuzzRESTConfig: whatever the bytes, a kubeconfig that RESTConfig accepts with the
// default Options gives a config that runs no command, reads no file, impersonates no
// one and talks https; and RESTConfig does not panic. (With the default Options,
// building reads no file and runs nothing, so the fuzzer cannot touch this machine.)
func FuzzRESTConfig(f *testing.F) {
	for _, seed := range []string{
		withUser("{token: abc}"),
		withUser(execUser),
		withUser(saToken),
		withUser(certFiles),
		withUser(oidcUser),
		withUser("{token: abc, as: system:admin, as-groups: [system:masters]}"),
		bypass(execUser),
		bypass(saToken),
		bypass(certFiles),
		bypass(oidcUser),
		unreferenced(execUser),
		unreferenced(saToken),
		kc(okCluster, okUser, "{name: c, context: {cluster: c, user: nobody}}", "c"),
		kc(okCluster, okUser, okContext, `""`),
		withServer(`server: "https://target.example:6443", certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt`),
		withServer(`server: "http://169.254.169.254"`),
		withServer(`server: "https://u:p@target.example"`),
		withServer(`server: "https://target.example:6443", proxy-url: "http://proxy.example:3128"`),
		`{"apiVersion":"v1","kind":"Config","current-context":"","clusters":[{"name":"","cluster":{"server":"https://x"}}],"users":[{"name":"","user":{"tokenFile":"/t"}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data, Options{})
		if err != nil {
			return
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("accepted a command: exec %v, auth-provider %v", cfg.ExecProvider, cfg.AuthProvider)
		}
		if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
			t.Fatalf("accepted files: token %q, cert %q, key %q, CA %q", cfg.BearerTokenFile, cfg.CertFile, cfg.KeyFile, cfg.CAFile)
		}
		if imp := cfg.Impersonate; imp.UserName != "" || imp.UID != "" || len(imp.Groups) > 0 || len(imp.Extra) > 0 {
			t.Fatalf("accepted impersonation %+v", imp)
		}
		if u, err := url.Parse(cfg.Host); err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
			t.Fatalf("accepted server %q", cfg.Host)
		}
	})
}
