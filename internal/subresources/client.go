package subresources

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxErrorBody bounds how much of an error answer an HTTPError keeps.
const maxErrorBody = 4096

// Client calls the endpoints of convoy-api: the health loop uses RequestSync to wake
// the controller-manager, convoyctl uses Health.
type Client struct {
	// BaseURL is the scheme and authority of convoy-api, optionally with a path prefix,
	// for example http://127.0.0.1:8090 (the observer's --sync-url).
	BaseURL string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// HTTPError is the error of a request that convoy-api answered with a status other
// than 2xx.
type HTTPError struct {
	// Method and URL of the request.
	Method, URL string
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Body is the start of the answer's body.
	Body string
}

// Error names the request and the status, then the message of the answer's
// metav1.Status when it has one, else its body.
func (e *HTTPError) Error() string {
	msg := strings.TrimSpace(e.Body)
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(e.Body), &st) == nil && st.Kind == "Status" && st.Message != "" {
		msg = st.Message
	}
	status := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if msg == "" {
		return fmt.Sprintf("%s %s: %s", e.Method, e.URL, status)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.URL, status, msg)
}

// RequestSync sends POST …/releases/{name}/sync, which sets the sync annotation of
// the Release namespace/name and so wakes the controller-manager. An answer other than
// 2xx is an *HTTPError.
func (c *Client) RequestSync(ctx context.Context, namespace, name string) error {
	resp, err := c.do(ctx, http.MethodPost, SyncPath(namespace, name))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
	return nil
}

// Health sends GET …/releases/{name}/health and decodes the answer. An answer other
// than 2xx is an *HTTPError.
func (c *Client) Health(ctx context.Context, namespace, name string) (*HealthResponse, error) {
	resp, err := c.do(ctx, http.MethodGet, HealthPath(namespace, name))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := &HealthResponse{}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("decoding the health of release %s/%s from %s: %w", namespace, name, resp.Request.URL, err)
	}
	return out, nil
}

// do sends a body-less request to path under BaseURL and returns a 2xx answer; the
// caller closes its body.
func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	url := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, url, err)
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, &HTTPError{Method: method, URL: url, StatusCode: resp.StatusCode, Body: string(body)}
	}
	return resp, nil
}
