package client

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kumodo/convoy-observer/internal/syncapi"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Client calls the Release subresources with client-go: the health loop uses RequestSync
// to wake the controller-manager, convoyctl uses Health.
//
// By default (BaseURL empty) the requests go to Config.Host, the kube-apiserver, which
// authenticates the caller, authorizes the request (verb create on releases/sync, get on
// releases/health in group subresources.convoy.kumodo.io) and proxies it to convoy-api
// through the APIService v1alpha1.subresources.convoy.kumodo.io. With BaseURL set, the
// requests go straight to convoy-api at that URL, with the credentials of Config, and
// convoy-api authenticates and authorizes them itself (DirectConfig builds such a config).
//
// An answer other than 2xx is an *apierrors.StatusError: the metav1.Status of the answer
// when it has one (convoy-api's 404 for a missing Release has reason NotFound and
// details naming the Release), else one that client-go builds from the status code.
// Transport failures are other errors. A Client is safe for concurrent use; its fields
// must not change after the first request.
type Client struct {
	// Config holds the caller's identity, trust, timeout and rate limits (usually from a
	// kubeconfig); nil means no credentials, Go's default trust and no rate limit, which
	// only makes sense with BaseURL (tests).
	Config *rest.Config
	// BaseURL, when not empty, is the scheme and authority of convoy-api itself,
	// optionally with a path prefix (for example https://127.0.0.1:8443): it replaces
	// Config.Host.
	BaseURL string
	// HTTP, when not nil, sends the requests instead of a client built from Config; it
	// then carries the TLS settings and credentials.
	HTTP *http.Client

	once sync.Once
	rc   *rest.RESTClient
	err  error
}

// NewClient returns a Client that calls the subresources through the kube-apiserver of
// cfg (a kubeconfig's config), as the user of cfg.
func NewClient(cfg *rest.Config) *Client { return &Client{Config: cfg} }

// DirectConfig returns a copy of cfg that reaches convoy-api at url directly: the same
// credentials (client certificate, bearer token), but trusting caFile (PEM) or, when
// caFile is "", the system roots, since convoy-api's serving certificate is not signed
// by the cluster's CA.
func DirectConfig(cfg *rest.Config, url, caFile string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Host = url
	out.APIPath = ""
	out.TLSClientConfig.CAFile, out.TLSClientConfig.CAData = caFile, nil
	out.TLSClientConfig.ServerName = ""
	out.TLSClientConfig.Insecure = false
	return out
}

// restClient builds the REST client of the group-version once.
func (c *Client) restClient() (*rest.RESTClient, error) {
	c.once.Do(func() {
		cfg := &rest.Config{QPS: -1} // no client-side rate limit without a Config
		if c.Config != nil {
			cfg = rest.CopyConfig(c.Config)
		}
		if c.BaseURL != "" {
			cfg.Host = strings.TrimRight(c.BaseURL, "/")
		}
		if cfg.Host == "" {
			c.err = fmt.Errorf("no address of the kube-apiserver or of convoy-api")
			return
		}
		cfg.APIPath = "/apis"
		cfg.GroupVersion = &schema.GroupVersion{Group: syncapi.Group, Version: syncapi.Version}
		cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
		if cfg.UserAgent == "" {
			cfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		if c.HTTP != nil {
			c.rc, c.err = rest.RESTClientForConfigAndClient(cfg, c.HTTP)
		} else {
			c.rc, c.err = rest.RESTClientFor(cfg)
		}
		if c.err != nil {
			c.err = fmt.Errorf("building the client of %s: %w", syncapi.PathPrefix, c.err)
		}
	})
	return c.rc, c.err
}

// RequestSync sends POST …/namespaces/{namespace}/releases/{name}/sync, which sets the
// sync annotation of the Release and so wakes the controller-manager. Errors: see
// Client; a missing Release is a NotFound *apierrors.StatusError.
func (c *Client) RequestSync(ctx context.Context, namespace, name string) error {
	_, err := c.Sync(ctx, namespace, name)
	return err
}

// Sync is RequestSync that also decodes the answer: the syncapi.SyncResponse, whose
// SyncRequestedAt is the annotation convoy-api wrote (empty when an older convoy-api
// answered without it, or with a body that is no SyncResponse: the request succeeded
// all the same, so that is no error). Errors: see RequestSync.
func (c *Client) Sync(ctx context.Context, namespace, name string) (*syncapi.SyncResponse, error) {
	rc, err := c.restClient()
	if err != nil {
		return nil, err
	}
	res := rc.Post().Namespace(namespace).Resource("releases").Name(name).SubResource(syncapi.SubresourceSync).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	out := &syncapi.SyncResponse{}
	if raw, err := res.Raw(); err == nil && json.Unmarshal(raw, out) == nil {
		return out, nil
	}
	// The request succeeded: an answer that is no SyncResponse only says nothing more.
	return &syncapi.SyncResponse{Release: namespace + "/" + name}, nil
}

// Health sends GET …/namespaces/{namespace}/releases/{name}/health and decodes the
// syncapi.HealthResult. Errors: see Client; a missing Release is a NotFound
// *apierrors.StatusError, an undecodable answer an error naming the Release.
func (c *Client) Health(ctx context.Context, namespace, name string) (*syncapi.HealthResult, error) {
	rc, err := c.restClient()
	if err != nil {
		return nil, err
	}
	res := rc.Get().Namespace(namespace).Resource("releases").Name(name).SubResource(syncapi.SubresourceHealth).Do(ctx)
	if err := res.Error(); err != nil { // the answer's metav1.Status, which Raw would not decode
		return nil, err
	}
	raw, err := res.Raw()
	if err != nil {
		return nil, err
	}
	out := &syncapi.HealthResult{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding the health of release %s/%s: %w", namespace, name, err)
	}
	return out, nil
}
