package faults

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// compactEtcd compacts etcd's history up to its current revision (physically, so the
// old revisions are gone before it returns) and returns that revision. A watch that
// resumes from an older resourceVersion then fails with 410 Gone.
func compactEtcd(ctx context.Context) (int64, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, fmt.Errorf("connecting to etcd: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Any read returns the store's current revision in its header.
	resp, err := c.Get(ctx, "compact-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading etcd's revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}
