# convoy-observer — see README.md.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

# The local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok), built from the Go module proxy and cached per version.
CONTROLPLANE = hack/controlplane.sh path

.PHONY: all build chart kubectl-convoy test test-faults fuzz e2e generate vet lint demo controlplane bench bench-scale bench-api images images-push release

all: build

build:
	go build ./...

vet:
	go vet ./...

## generate: deepcopy code, apply configurations (api/v1alpha1/applyconfiguration, for the
## observer's typed Server-Side Apply) and CRDs (config/crd/bases) from the types in api/;
## convoy-api's OpenAPI definitions (internal/syncapi/apiserver/zz_generated.openapi.go)
## from the types tagged +k8s:openapi-gen=true; then the Helm chart (make chart).
generate:
	go tool controller-gen object paths=./api/...
	go tool controller-gen applyconfiguration:omitToolVersion=true paths=./api/v1alpha1/...
	go tool controller-gen crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=config/crd/bases
	go generate ./internal/syncapi/apiserver/
	$(MAKE) chart

## chart: the Helm chart charts/convoy-observer (templates, crds/, values.yaml) from the
## kustomize bases config/default, config/monitoring and config/unsafe-read-as-observer
## (hack/chart; its tests fail when the chart is stale).
chart:
	go run ./hack/chart/gen

## images: OCI images of convoy-observer and convoy-api (bin/images/NAME, OCI layouts;
## bin/images/digests), built from the sources with no container runtime and no base
## image: a static binary, CA certificates and user 65532 (hack/images). Each is an image
## index of PLATFORMS (cross-compiled), and each platform image has two OCI referrers in the
## layout: an SPDX SBOM of the binary's modules and a SLSA provenance statement. The same
## commit gives the same digests. VERSION is the tag (default: git describe).
PLATFORMS ?= linux/amd64,linux/arm64
VERSION ?=
images:
	go run ./hack/images build --out bin/images --platforms $(PLATFORMS) $(if $(VERSION),--version $(VERSION))

## images-push: push bin/images to REGISTRY/NAME:VERSION (credentials of ~/.docker/config.json).
images-push:
	@[ -n "$(REGISTRY)" ] || { echo "usage: make images-push REGISTRY=registry.example.com/convoy [VERSION=v0.1.0]" >&2; exit 2; }
	go run ./hack/images push --out bin/images --registry $(REGISTRY) $(if $(VERSION),--version $(VERSION))

## release: dist/install.yaml (config/default with the images pinned to the digests of
## bin/images, named REGISTRY/NAME@sha256:…, labelled app.kubernetes.io/version=VERSION),
## dist/convoy-observer-VERSION.tgz (the Helm chart, the same images pinned),
## dist/rules-library.yaml (config/rules/library), and the kubectl plugin: dist/convoy.yaml
## (its krew manifest) and one dist/kubectl-convoy_VERSION_OS_ARCH.tar.gz per platform, to be
## published at PLUGIN_URL (default: the repository's release download URL of VERSION).
## Builds the images first; push them with make images-push (same REGISTRY and VERSION):
## the digests are the same.
PLUGIN_URL ?=
release:
	@[ -n "$(VERSION)" ] && [ -n "$(REGISTRY)" ] || { echo "usage: make release REGISTRY=registry.example.com/convoy VERSION=v0.1.0" >&2; exit 2; }
	$(MAKE) images VERSION=$(VERSION)
	go run ./hack/release --images bin/images --registry "$(REGISTRY)" --version $(VERSION) --out dist
	go run ./hack/images plugin --out dist --version $(VERSION) $(if $(PLUGIN_URL),--url $(PLUGIN_URL))

## kubectl-convoy: convoyctl as the kubectl plugin, bin/kubectl-convoy (put bin/ on $$PATH,
## then: kubectl convoy release status NAME -n NAMESPACE).
kubectl-convoy:
	go build -o bin/kubectl-convoy ./cmd/convoyctl

## controlplane: build the control-plane binaries (cold: 35 min on 2 busy cores, with progress; then cached).
controlplane:
	$(CONTROLPLANE)

## lint: golangci-lint with .golangci.yml (the standard linters, misspell, nilerr,
## bodyclose; gofmt), the version pinned by hack/lint/go.mod's tool directive (built from
## the Go module proxy on first use, then cached).
lint:
	go tool -modfile=hack/lint/go.mod golangci-lint run ./...

## test: every test, against a real kube-apiserver and etcd.
test:
	assets="$$($(CONTROLPLANE))"; KUBEBUILDER_ASSETS="$$assets" go test -race -count=1 -timeout 30m ./...

## bench: the rules engine side by side with kstatus.Compute and a hand-written Go check of the
## same rule (same objects, one run, ratios printed), and the rules' cost of one pass over a
## 100-entry Release with convoy-defaults and with the whole library and the generic set
## selected (and their ratio); no control plane needed.
bench:
	go test -count=1 -v -run TestSideBySide ./health/bench/ -args -side-by-side | grep -v -e "^=== RUN" -e "^--- PASS" -e "^PASS$$"

## test-faults: the long fault-injection suite (test/faults: many rounds of each fault, with
## the figures of docs/operations.md); make test runs one short round of each.
test-faults:
	assets="$$($(CONTROLPLANE))"; FAULTS_LONG=1 KUBEBUILDER_ASSETS="$$assets" go test -count=1 -v -timeout 60m -run TestFaults ./test/faults/

## fuzz: a short run of every fuzz target of the observer (FUZZTIME each, default 30s; a count
## such as 50000x never fails at the deadline, see .ci/run).
FUZZTIME ?= 30s
fuzz:
	assets="$$($(CONTROLPLANE))"; export KUBEBUILDER_ASSETS="$$assets"; \
	for t in FuzzReadOwnership FuzzOwnershipAsFieldpath FuzzCompactFields FuzzTimeAdmission FuzzHookTimeout; do go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -parallel 1 ./internal/inventory/; done; \
	for t in FuzzDecodeObjects FuzzDecodeRuleSets; do go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -parallel 1 ./health/manifest/; done; \
	go test -run '^$$' -fuzz '^FuzzFunctionArguments$$' -fuzztime $(FUZZTIME) -parallel 1 ./health/celbound/; \
	go test -run '^$$' -fuzz '^FuzzRESTConfig$$' -fuzztime $(FUZZTIME) -parallel 1 ./internal/kubeconfig/

## bench-api: requests per second and p50/p99 latency of /health and /sync through the
## kube-apiserver's aggregator to convoy-api, at 1,000 Releases (real kube-apiserver, etcd
## and convoy-api; 16 requests at a time).
bench-api:
	assets="$$($(CONTROLPLANE))"; KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench ThroughAggregator -benchtime 3000x ./internal/syncapi/apiserver/ 2>/dev/null | grep -e Benchmark -e '^ok' -e FAIL

## e2e: only the end-to-end tests (test/e2e: the demo scenario, run with --once); make test runs them too.
e2e:
	assets="$$($(CONTROLPLANE))"; KUBEBUILDER_ASSETS="$$assets" go test -race -count=1 -v ./test/e2e/...

## bench-scale: the scale benchmark (docs/operations.md, "Scaling and sizing"): for each N,
## a fresh local control plane, N Releases × M Deployments, the observer binary; prints one
## table per N. ARGS are passed to it, e.g. ARGS='--releases 10,100,1000,10000 --changes 50';
## ARGS='--releases 1000 --rules defaults,library' runs each N with convoy-defaults and with
## the whole rule library and the generic set, and prints both converge times side by side.
## make test runs a small N (test/scale) and asserts the shape only.
bench-scale:
	assets="$$($(CONTROLPLANE))"; KUBEBUILDER_ASSETS="$$assets" go run ./hack/scale $(ARGS)

## demo: the demo scenario on a local simulated cluster (see README "Demo"); ARGS are passed
## to it, e.g. ARGS=--once to run it without waiting for Ctrl-C (exit status 0 = every
## expected state reached).
# It builds the driver first and execs it, so Ctrl-C reaches it alone and a clean stop
# is not reported as a failure (go run exits 1 whenever it is interrupted).
demo:
	assets="$$($(CONTROLPLANE))"; go build -o bin/demo ./hack/demo; KUBEBUILDER_ASSETS="$$assets" exec bin/demo $(ARGS)
