package testenv

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// NotKubernetes starts an HTTP server that is not a Kubernetes API server, as a tenant's
// kubeconfig may name one (any address the observer's pod can reach). It answers
// /version, and each object read by its last path segment, the object's name:
//
//   - "ok": a ConfigMap of that name with data.ready "true"
//   - "body500": a 500 with an HTML body quoting secret
//   - "status403": a 403 Status whose message is secret
//   - "body503": a 503 whose plain body is secret
//   - "reason418": a 418 Status whose reason and message are secret
//   - "garbage200": a 200 JSON body that is no object, with secret as its key
//   - anything else: 404
//
// The server is closed when the test ends.
func NotKubernetes(t testing.TB, secret string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		switch name {
		case "version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"37"}`))
		case "ok":
			namespace := ""
			if parts := strings.Split(r.URL.Path, "/"); len(parts) > 4 {
				namespace = parts[4]
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","namespace":%q},"data":{"ready":"true"}}`, namespace)
		case "body500":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html>" + secret + "</html>"))
		case "status403":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"reason":"Forbidden","message":%q}`, secret)
		case "body503":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(secret))
		case "reason418":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":418,"reason":%q,"message":%q}`, secret, secret)
		case "garbage200":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{%q:1}`, secret)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// NotHTTP starts a TCP server that does not speak HTTP: it reads the first line of what
// it is sent, answers "SSH-2.0-<secret>" and closes the connection. It reads first so
// that the answer always comes as the reply to a request: a banner sent before the
// request reaches an idle connection, and net/http then fails without quoting it. It
// returns the server's http:// URL; the server stops when the test ends.
func NotHTTP(t testing.TB, secret string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					return
				}
				_, _ = c.Write([]byte("SSH-2.0-" + secret + "\r\n"))
			}()
		}
	}()
	return "http://" + l.Addr().String()
}
