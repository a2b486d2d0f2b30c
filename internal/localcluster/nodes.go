package localcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeAnnotation marks a Node as simulated by kwok.
const NodeAnnotation = "kwok.x-k8s.io/node"

// createNodes creates n fake nodes with room for plenty of Pods. kwok
// (--manage-all-nodes) then plays their kubelet: it marks them Ready, keeps their
// heartbeat and runs the Pods bound to them.
func (c *Cluster) createNodes(ctx context.Context, n int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{NodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"type":                   "kwok",
				},
			},
			Status: corev1.NodeStatus{
				Capacity:    capacity,
				Allocatable: capacity,
				NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "fake", OperatingSystem: "linux", Architecture: "amd64"},
			},
		}
		if err := c.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the fake node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, name)
	}
	return nil
}

// waitNodesReady waits until every fake node is Ready without a NoSchedule taint, or
// a process of the cluster stops, or timeout passes.
func (c *Cluster) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var pending []string
	for {
		if err := c.Check(); err != nil {
			return err
		}
		pending = pending[:0]
		for _, name := range c.Nodes {
			node := &corev1.Node{}
			if err := c.Client.Get(ctx, nameKey(name), node); err != nil {
				pending = append(pending, fmt.Sprintf("%s (%v)", name, err))
				continue
			}
			if why := notReady(node); why != "" {
				pending = append(pending, name+" ("+why+")")
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake nodes not Ready after %s: %s; see the logs in %s/logs", timeout, strings.Join(pending, ", "), c.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// notReady says why node cannot take Pods yet, or returns "".
func notReady(node *corev1.Node) string {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return "taint " + t.Key
		}
	}
	return ""
}

// nameKey is the key of a cluster-scoped object.
func nameKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
