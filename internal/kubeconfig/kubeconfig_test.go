package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const head = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://target.example:6443"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user:
`

func TestRESTConfig(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, user string
		o          Options
		want       string // "" means accepted
	}{
		{"inline token", "    token: abc\n", Options{}, ""},
		{"inline client certificate", "    client-certificate-data: Zm9v\n    client-key-data: YmFy\n", Options{}, ""},
		{"exec", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}\n", Options{},
			`runs a command to get credentials (exec (command "/bin/sh")): refused unless --insecure-kubeconfig-exec is set`},
		{"exec allowed", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, interactiveMode: Never}\n", Options{AllowExec: true}, ""},
		{"auth-provider", "    auth-provider: {name: oidc, config: {idp-issuer-url: https://x}}\n", Options{AllowFiles: true},
			`auth-provider "oidc"`},
		{"service-account token file", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", Options{AllowExec: true},
			`reads credentials from local files (tokenFile "/var/run/secrets/kubernetes.io/serviceaccount/token")`},
		{"client key files", "    client-certificate: /etc/tls/c.crt\n    client-key: /etc/tls/c.key\n", Options{},
			`(client-certificate "/etc/tls/c.crt", client-key "/etc/tls/c.key"): put the credentials in the kubeconfig itself`},
		{"files allowed", "    tokenFile: " + token + "\n", Options{AllowFiles: true}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := RESTConfig([]byte(head+c.user), c.o)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && cfg.Host != "https://target.example:6443":
				t.Fatalf("host %q", cfg.Host)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := RESTConfig(nil, Options{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty kubeconfig: %v", err)
	}
	if _, err := RESTConfig([]byte("{not yaml"), Options{}); err == nil {
		t.Fatal("garbage accepted")
	}
}
