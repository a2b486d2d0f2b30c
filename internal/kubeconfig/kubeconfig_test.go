package kubeconfig

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kc is a kubeconfig with these clusters, users and contexts (YAML flow items) and
// current-context.
func kc(clusters, users, contexts, current string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [%s]\nusers: [%s]\ncontexts: [%s]\ncurrent-context: %s\n",
		clusters, users, contexts, current)
}

const (
	okCluster = `{name: c, cluster: {server: "https://target.example:6443"}}`
	okUser    = `{name: u, user: {token: abc}}`
	okContext = `{name: c, context: {cluster: c, user: u}}`
	execUser  = `{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id], interactiveMode: Never}}`
	saToken   = `{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}`
	certFiles = `{client-certificate: /etc/tls/c.crt, client-key: /etc/tls/c.key}`
	oidcUser  = `{auth-provider: {name: oidc, config: {idp-issuer-url: "https://x"}}}`
)

// withUser is the usual kubeconfig whose current user u is user (a YAML flow mapping).
func withUser(user string) string {
	return kc(okCluster, "{name: u, user: "+user+"}", okContext, "c")
}

// withServer is the usual kubeconfig whose cluster has these fields (YAML flow).
func withServer(fields string) string {
	return kc("{name: c, cluster: {"+fields+"}}", okUser, okContext, "c")
}

// bypass is the shape of the empty-current-context bypass: no context, a cluster and a
// user both named "", which clientcmd resolves to without any context.
func bypass(user string) string {
	return kc(`{name: "", cluster: {server: "https://attacker.example"}}`, `{name: "", user: `+user+`}`, "", `""`)
}

// unreferenced is a valid current context beside a cluster and a user named "" that no
// context names: the user is checked all the same.
func unreferenced(user string) string {
	return kc(okCluster+`, {name: "", cluster: {server: "https://attacker.example"}}`, okUser+`, {name: "", user: `+user+`}`, okContext, "c")
}

func TestRESTConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	token, crt, key, ca := file("token"), file("c.crt"), file("c.key"), file("ca.crt")
	all := Options{AllowExec: true, AllowFiles: true, AllowInsecureHTTP: true}
	for _, c := range []struct {
		name, data string
		o          Options
		want       string // a part of the error; "" means accepted
		notWant    string // what the error must not say
		host       string // the accepted config's Host; "" means https://target.example:6443
	}{
		{name: "inline token", data: withUser("{token: abc}")},
		{name: "inline client certificate", data: withUser("{client-certificate-data: Zm9v, client-key-data: YmFy}")},
		{name: "basic auth", data: withUser("{username: a, password: b}")},
		{name: "no user: anonymous", data: kc(okCluster, "", "{name: c, context: {cluster: c}}", "c")},

		// The current user's commands and files.
		{name: "exec", data: withUser(execUser),
			want: `user "u" runs a command to get credentials (exec (command "/bin/sh")): refused unless --insecure-kubeconfig-exec is set`},
		{name: "exec allowed", data: withUser(execUser), o: Options{AllowExec: true}},
		{name: "auth-provider", data: withUser(oidcUser), o: Options{AllowFiles: true},
			want: `user "u" runs a command to get credentials (auth-provider "oidc"): refused unless --insecure-kubeconfig-exec`},
		{name: "auth-provider allowed", data: withUser(oidcUser), o: Options{AllowExec: true}},
		{name: "service-account token file", data: withUser(saToken), o: Options{AllowExec: true},
			want: `user "u" reads credentials from local files (tokenFile "/var/run/secrets/kubernetes.io/serviceaccount/token"): put them in the kubeconfig itself (token, client-certificate-data, client-key-data), or set --insecure-kubeconfig-files`},
		{name: "token file beside a token", data: withUser("{token: abc, tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}"),
			want: `(tokenFile "/var/run/secrets/kubernetes.io/serviceaccount/token")`},
		{name: "client key files", data: withUser(certFiles),
			want: `(client-certificate "/etc/tls/c.crt", client-key "/etc/tls/c.key"): put them in the kubeconfig itself`},
		{name: "token file allowed", data: withUser("{tokenFile: " + token + "}"), o: Options{AllowFiles: true}},
		{name: "client key files allowed", data: withUser("{client-certificate: " + crt + ", client-key: " + key + "}"), o: Options{AllowFiles: true}},
		{name: "relative token file", data: withUser("{tokenFile: token}"), o: Options{AllowFiles: true},
			want: `user "u" names local files by relative paths (tokenFile "token"): refused even with --insecure-kubeconfig-files`},

		// The empty-current-context bypass: refused whatever the user does.
		{name: "bypass with exec", data: bypass(execUser), want: "the kubeconfig has no current-context"},
		{name: "bypass with token file", data: bypass(saToken), want: "the kubeconfig has no current-context"},
		{name: "bypass with client key files", data: bypass(certFiles), want: "the kubeconfig has no current-context"},
		{name: "bypass with auth-provider", data: bypass(oidcUser), want: "the kubeconfig has no current-context"},
		{name: "bypass with every flag", data: bypass("{token: abc}"), o: all, want: "the kubeconfig has no current-context"},
		// The same users where no context names them: each is checked.
		{name: "non-current user with exec", data: unreferenced(execUser),
			want: `user "" runs a command to get credentials (exec (command "/bin/sh"))`},
		{name: "non-current user with token file", data: unreferenced(saToken),
			want: `user "" reads credentials from local files (tokenFile`},
		{name: "non-current user with client key files", data: unreferenced(certFiles),
			want: `user "" reads credentials from local files (client-certificate "/etc/tls/c.crt", client-key`},
		{name: "non-current user with auth-provider", data: unreferenced(oidcUser),
			want: `user "" runs a command to get credentials (auth-provider "oidc")`},
		{name: "non-current user with exec allowed", data: unreferenced(execUser), o: Options{AllowExec: true}},
		{name: "non-current cluster's server", data: kc(okCluster+`, {name: o, cluster: {server: "http://169.254.169.254"}}`, okUser, okContext, "c"),
			want: `cluster "o" has a plain http:// server`},
		{name: "non-current context with exec", data: kc(okCluster, okUser+`, {name: x, user: `+execUser+`}`, okContext+", {name: other, context: {cluster: c, user: x}}", "c"),
			want: `user "x" runs a command`},

		// References.
		{name: "current context missing", data: kc(okCluster, okUser, okContext, "elsewhere"),
			want: `current-context "elsewhere" is not one of its contexts`},
		{name: "context naming a missing user", data: kc(okCluster, okUser, "{name: c, context: {cluster: c, user: nobody}}", "c"),
			want: `context "c" names user "nobody", which the kubeconfig does not define`},
		{name: "non-current context naming a missing user", data: kc(okCluster, okUser, okContext+", {name: d, context: {cluster: c, user: nobody}}", "c"),
			want: `context "d" names user "nobody"`},
		{name: "context naming a missing cluster", data: kc(okCluster, okUser, "{name: c, context: {cluster: gone, user: u}}", "c"),
			want: `context "c" names cluster "gone", which the kubeconfig does not define`},

		// Impersonation: refused whatever the flags.
		{name: "as", data: withUser("{token: abc, as: system:admin}"), o: all,
			want: `user "u" chooses whom to impersonate (as "system:admin"): refused, whatever the flags`},
		{name: "as with groups, uid and extra", data: withUser("{token: abc, as: x, as-uid: \"1\", as-groups: [system:masters], as-user-extra: {k: [v]}}"),
			want: `(as "x", as-uid, as-groups, as-user-extra)`},
		{name: "as-groups alone", data: withUser("{token: abc, as-groups: [system:masters]}"), want: `chooses whom to impersonate (as-groups)`},
		{name: "non-current user with as", data: unreferenced("{as: system:admin}"), want: `user "" chooses whom to impersonate`},

		// A cluster's certificate authority.
		{name: "certificate-authority file", data: withServer(`server: "https://target.example:6443", certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt`),
			want: `cluster "c" reads a certificate authority from local files (certificate-authority "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"): put them in the kubeconfig itself (certificate-authority-data), or set --insecure-kubeconfig-files`},
		{name: "certificate-authority file allowed", data: withServer(`server: "https://target.example:6443", certificate-authority: ` + ca), o: Options{AllowFiles: true}},
		{name: "relative certificate-authority file", data: withServer(`server: "https://target.example:6443", certificate-authority: ca.crt`), o: Options{AllowFiles: true},
			want: `cluster "c" names local files by relative paths (certificate-authority "ca.crt")`},
		{name: "inline certificate-authority", data: withServer(`server: "https://target.example:6443", certificate-authority-data: Zm9v`)},

		// Servers.
		{name: "http server", data: withServer(`server: "http://target.example:6443"`),
			want: `cluster "c" has a plain http:// server: refused unless --insecure-target-http is set`},
		{name: "http server allowed", data: withServer(`server: "http://target.example:6443"`), o: Options{AllowInsecureHTTP: true}, host: "http://target.example:6443"},
		{name: "server without scheme", data: withServer(`server: "target.example:6443"`), want: `has a server that is not an https:// URL (scheme "target.example")`},
		{name: "server without host", data: withServer(`server: "https:///api"`), want: `cluster "c" has a server without a host`},
		{name: "no server", data: withServer(`insecure-skip-tls-verify: true`), want: `cluster "c" has no server`},
		{name: "file server", data: withServer(`server: "file:///etc/passwd"`), want: `(scheme "file")`},
		{name: "server with user information", data: withServer(`server: "https://admin:hunter2@target.example:6443"`), o: all,
			want: `cluster "c" has a server with user information (user@host): refused`, notWant: "hunter2"},
		{name: "server in the allow-list", data: withServer(`server: "https://target.example:6443"`), o: Options{AllowedServers: []string{"other.example", "TARGET.example"}}},
		{name: "server outside the allow-list", data: withServer(`server: "https://evil.example:6443"`), o: Options{AllowedServers: []string{"target.example"}},
			want: `cluster "c" has a server whose host "evil.example:6443" is not in --target-server-allowlist`},
		{name: "server with a trailing dot", data: withServer(`server: "https://target.example.:6443"`), o: Options{AllowedServers: []string{"target.example"}},
			want: `host "target.example.:6443" is not in --target-server-allowlist`},
		{name: "server with a Kelvin sign", data: withServer("server: \"https://\u212Aube.example\""), o: Options{AllowedServers: []string{"kube.example"}},
			want: `is not in --target-server-allowlist`},
		{name: "server on the allowed host:port", data: withServer(`server: "https://target.example:6443"`), o: Options{AllowedServers: []string{"target.example:6443"}}},
		{name: "server on another port", data: withServer(`server: "https://target.example:10250"`), o: Options{AllowedServers: []string{"target.example:6443"}},
			want: `host "target.example:10250" is not in`},
		{name: "server on the default port", data: withServer(`server: "https://target.example"`), o: Options{AllowedServers: []string{"target.example:443"}},
			host: "https://target.example"},
		{name: "server in a CIDR", data: withServer(`server: "https://10.1.2.3:6443"`), o: Options{AllowedServers: []string{"192.168.0.0/16", "10.0.0.0/8"}},
			host: "https://10.1.2.3:6443"},
		{name: "server outside a CIDR", data: withServer(`server: "https://11.1.2.3:6443"`), o: Options{AllowedServers: []string{"10.0.0.0/8"}},
			want: `host "11.1.2.3:6443" is not in --target-server-allowlist`},
		{name: "IPv6 server in a CIDR", data: withServer(`server: "https://[fd00::1]:6443"`), o: Options{AllowedServers: []string{"fd00::/8"}},
			host: "https://[fd00::1]:6443"},
		{name: "IPv4-mapped server in a CIDR", data: withServer(`server: "https://[::ffff:10.1.2.3]:6443"`), o: Options{AllowedServers: []string{"10.0.0.0/8"}},
			host: "https://[::ffff:10.1.2.3]:6443"},
		{name: "name server with a CIDR list: no DNS", data: withServer(`server: "https://localhost:6443"`), o: Options{AllowedServers: []string{"127.0.0.0/8"}},
			want: `host "localhost:6443" is not in --target-server-allowlist (a CIDR entry matches only an IP address written in the URL: names are not resolved)`},
		{name: "IP server on an allowed IP", data: withServer(`server: "https://[::1]:6443"`), o: Options{AllowedServers: []string{"0:0::1"}}, host: "https://[::1]:6443"},
		{name: "invalid allow-list entry", data: withUser("{token: abc}"), o: Options{AllowedServers: []string{"https://target.example"}},
			want: `--target-server-allowlist entry "https://target.example" is neither a host, a host:port nor a CIDR`},
		{name: "allow-list entry with port 0", data: withUser("{token: abc}"), o: Options{AllowedServers: []string{"target.example:0"}},
			want: `--target-server-allowlist entry "target.example:0" is neither`},
		{name: "allow-list entry with a URL's userinfo", data: withUser("{token: abc}"), o: Options{AllowedServers: []string{"u@target.example"}},
			want: `--target-server-allowlist entry "u@target.example" is neither`},

		// Proxies.
		{name: "http proxy", data: withServer(`server: "https://target.example:6443", proxy-url: "http://proxy.example:3128"`)},
		{name: "proxy in the allow-list", data: withServer(`server: "https://target.example:6443", proxy-url: "socks5://10.0.0.9"`),
			o: Options{AllowedServers: []string{"target.example", "10.0.0.0/24"}}},
		{name: "proxy outside the allow-list", data: withServer(`server: "https://target.example:6443", proxy-url: "http://169.254.169.254"`),
			o: Options{AllowedServers: []string{"target.example"}}, want: `cluster "c" has a proxy whose host "169.254.169.254:80" is not in --target-server-allowlist`},
		{name: "proxy with another scheme", data: withServer(`server: "https://target.example:6443", proxy-url: "ftp://proxy.example"`),
			want: `cluster "c" has a proxy whose scheme "ftp" is not http, https nor socks5`},

		// Quoted values are capped.
		{name: "long command", data: withUser(`{exec: {apiVersion: client.authentication.k8s.io/v1, command: /` + strings.Repeat("a", 500) + `, interactiveMode: Never}}`),
			want: `(exec (command "/` + strings.Repeat("a", 99) + `"…))`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := RESTConfig([]byte(c.data), c.o)
			if c.want == "" {
				host := c.host
				if host == "" {
					host = "https://target.example:6443"
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.Host != host {
					t.Fatalf("host %q, want %q", cfg.Host, host)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if c.notWant != "" && strings.Contains(err.Error(), c.notWant) {
				t.Fatalf("err = %v: it says %q", err, c.notWant)
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

// TestRESTConfigRunsNothing: building the config of a kubeconfig whose exec is allowed
// does not run the command (it runs when a client makes its first request).
func TestRESTConfigRunsNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	data := withUser(`{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, "touch ` + marker + `"], interactiveMode: Never}}`)
	cfg, err := RESTConfig([]byte(data), Options{AllowExec: true})
	if err != nil || cfg.ExecProvider == nil {
		t.Fatalf("cfg %v, err %v", cfg, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the exec command ran while the config was built")
	}
}

// TestCheckBuilt: the second line, on the built config alone (checkRaw refuses the
// kubeconfigs that would build these).
func TestCheckBuilt(t *testing.T) {
	t.Parallel()
	proxy := func(raw string) func(*http.Request) (*url.URL, error) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return http.ProxyURL(u)
	}
	for _, c := range []struct {
		name string
		edit func(*rest.Config)
		o    Options
		want string // "" means accepted
	}{
		{"clean", func(*rest.Config) {}, Options{}, ""},
		{"exec", func(c *rest.Config) { c.ExecProvider = &clientcmdapi.ExecConfig{Command: "sh"} }, Options{AllowFiles: true}, "runs a command (an exec plugin): refused unless --insecure-kubeconfig-exec"},
		{"exec allowed", func(c *rest.Config) { c.ExecProvider = &clientcmdapi.ExecConfig{Command: "sh"} }, Options{AllowExec: true}, ""},
		{"auth-provider", func(c *rest.Config) { c.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"} }, Options{}, "(an auth-provider)"},
		{"token file", func(c *rest.Config) { c.BearerTokenFile = "/t" }, Options{}, "reads local files (tokenFile): refused unless --insecure-kubeconfig-files"},
		{"cert file", func(c *rest.Config) { c.CertFile = "/c" }, Options{}, "(client-certificate)"},
		{"key file", func(c *rest.Config) { c.KeyFile = "/k" }, Options{}, "(client-key)"},
		{"CA file", func(c *rest.Config) { c.CAFile = "/ca" }, Options{}, "(certificate-authority)"},
		{"files allowed", func(c *rest.Config) { c.BearerTokenFile, c.CAFile = "/t", "/ca" }, Options{AllowFiles: true}, ""},
		{"impersonation", func(c *rest.Config) { c.Impersonate.Groups = []string{"system:masters"} }, Options{AllowExec: true, AllowFiles: true}, "impersonates: refused, whatever the flags"},
		{"http", func(c *rest.Config) { c.Host = "http://target.example" }, Options{}, "plain http:// server: refused unless --insecure-target-http"},
		{"host without scheme", func(c *rest.Config) { c.Host = "target.example" }, Options{}, "not an https:// URL"},
		{"outside the allow-list", func(*rest.Config) {}, Options{AllowedServers: []string{"10.0.0.0/8"}}, "is not in --target-server-allowlist"},
		{"proxy", func(c *rest.Config) { c.Proxy = proxy("http://proxy.example") }, Options{}, ""},
		{"proxy outside the allow-list", func(c *rest.Config) { c.Proxy = proxy("http://proxy.example") }, Options{AllowedServers: []string{"target.example"}},
			`has a proxy whose host "proxy.example:80" is not in --target-server-allowlist`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := &rest.Config{Host: "https://target.example:6443"}
			c.edit(cfg)
			servers, err := parseAllowList(c.o.AllowedServers)
			if err != nil {
				t.Fatal(err)
			}
			err = checkBuilt(cfg, c.o, servers)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestBindFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--target-server-allowlist=a.example,10.0.0.0/8", "--target-server-allowlist=b.example:6443",
		"--insecure-target-http", "--insecure-kubeconfig-exec", "--insecure-kubeconfig-files"}); err != nil {
		t.Fatal(err)
	}
	want := Options{AllowExec: true, AllowFiles: true, AllowedServers: []string{"a.example", "10.0.0.0/8", "b.example:6443"}, AllowInsecureHTTP: true}
	if fmt.Sprint(o) != fmt.Sprint(want) {
		t.Fatalf("options %+v, want %+v", o, want)
	}
}

// TestValidate: a --target-server-allowlist entry that does not parse is refused at
// startup, naming the flag and the entry; good entries pass.
func TestValidate(t *testing.T) {
	t.Parallel()
	if err := (Options{AllowedServers: []string{"10.0.0.0/8", "api.example.com", "api.example.com:6443", "[::1]:443"}}).Validate(); err != nil {
		t.Errorf("good entries: %v", err)
	}
	for _, bad := range []string{"10.0.0.0/33", "host:0", "user@host", "host:port"} {
		err := (Options{AllowedServers: []string{"10.0.0.1", bad}}).Validate()
		if err == nil || !strings.Contains(err.Error(), "--target-server-allowlist") || !strings.Contains(err.Error(), bad) {
			t.Errorf("entry %q: %v; want an error naming the flag and the entry", bad, err)
		}
	}
}
