// Package e2e holds the end-to-end tests of convoy-observer: they run the demo
// (hack/demo) as a real command against a local simulated cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok from
// hack/controlplane.sh), with convoy-api and convoy-observer as real processes.
//
// The tests need the control-plane binaries: KUBEBUILDER_ASSETS (set by make test) or,
// when it is unset, the directory that hack/controlplane.sh prints (building what is
// missing first). Without them the tests fail; they never skip.
package e2e
