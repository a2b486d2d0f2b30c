#!/usr/bin/env bash
# controlplane.sh builds the local control plane from the Go module proxy and caches it.
#
#   hack/controlplane.sh path [COMPONENT...]
#
# prints the directory that holds the binaries (and nothing else on stdout), building
# whatever is missing first. COMPONENT is any of etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok; none means all five. The directory also
# holds kwok-stages.yaml, the node and pod stages that kwok needs.
#
# Binaries are cached per version under ${XDG_CACHE_HOME:-$HOME/.cache}/convoy-observer:
# the cache key is a hash of the tools modules in hack/tools, so changing a version there
# builds a fresh set and later runs (and CI on the same machine) reuse it in seconds.
# Cold, on 2 cores: kube-apiserver ~11 min, kube-controller-manager ~3 min, etcd ~1 min.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

usage() { echo "usage: $0 path [etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok ...]" >&2; exit 2; }
[ "${1:-}" = path ] || usage
shift
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

key=$(cat "$tools"/*/go.mod "$tools"/*/go.sum "$tools"/*/*.go "$0" | sha256sum | cut -c1-16)
kubever=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$tools/kube/go.mod")
dir="${XDG_CACHE_HOME:-$HOME/.cache}/convoy-observer/controlplane/${kubever}-${key}"
mkdir -p "$dir"

# One builder at a time: parallel test binaries or a CI run may call this together.
exec 9>"$dir/.lock"
flock 9

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
	local name=$1 mod=$2 pkg=$3 ldflags=${4:-}
	[ -x "$dir/$name" ] && return 0
	echo "controlplane: building $name (cached afterwards in $dir)" >&2
	local start=$SECONDS
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$dir/.$name.tmp" "$pkg") >&2
	mv "$dir/.$name.tmp" "$dir/$name"
	echo "controlplane: built $name in $((SECONDS - start))s" >&2
}

kubeldflags() {
	local minor=${kubever#v1.}; minor=${minor%%.*}
	echo "-X k8s.io/component-base/version.gitVersion=$kubever -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
}

stages() {
	[ -s "$dir/kwok-stages.yaml" ] && return 0
	local src
	src=$(cd "$tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	{
		for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
			echo "---"
			cat "$src/kustomize/stage/$f"
		done
	} >"$dir/.kwok-stages.tmp"
	mv "$dir/.kwok-stages.tmp" "$dir/kwok-stages.yaml"
}

for c in "${want[@]}"; do
	case $c in
	etcd) build etcd "$tools/etcd" . ;;
	kube-apiserver | kube-controller-manager | kube-scheduler)
		build "$c" "$tools/kube" "k8s.io/kubernetes/cmd/$c" "$(kubeldflags)" ;;
	kwok) build kwok "$tools/kwok" sigs.k8s.io/kwok/cmd/kwok && stages ;;
	*) usage ;;
	esac
done

echo "$dir"
