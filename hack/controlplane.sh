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
# the cache key is a hash of the tools modules in hack/tools (their go.mod, go.sum and Go
# sources; not this script, so editing it never rebuilds), so changing a version there
# builds a fresh set and later runs (and CI on the same machine) reuse it in seconds.
#
# A cold build prints its progress to stderr every 30 s: the component, the packages
# compiled so far out of its dependencies, the time so far and the expected total. The
# expected times (below) were measured on a fresh 2-core machine that was busy
# with other builds; on a quiet machine it is faster. Components are built in the order
# asked; without arguments etcd and kube-apiserver come first, which is all that the
# tests of internal/testenv need.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

usage() { echo "usage: $0 path [etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok ...]" >&2; exit 2; }
[ "${1:-}" = path ] || usage
shift
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

key=$(cat "$tools"/*/go.mod "$tools"/*/go.sum "$tools"/*/*.go | sha256sum | cut -c1-16)
kubever=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$tools/kube/go.mod")
dir="${XDG_CACHE_HOME:-$HOME/.cache}/convoy-observer/controlplane/${kubever}-${key}"
mkdir -p "$dir"

# Everything asked for is there (binaries are moved into place whole): no need to wait
# for a builder of other components, e.g. tests that need only etcd and kube-apiserver
# while kwok is being built.
ready=1
for c in "${want[@]}"; do
	case $c in
	kwok) [ -x "$dir/kwok" ] && [ -s "$dir/kwok-stages.yaml" ] || ready=0 ;;
	*) [ -x "$dir/$c" ] || ready=0 ;;
	esac
done
if [ "$ready" = 1 ]; then
	echo "$dir"
	exit 0
fi

# One builder at a time: parallel test binaries or a CI run may call this together.
exec 9>"$dir/.lock"
if ! flock -n 9; then
	echo "controlplane: waiting for another build of the control plane in $dir to finish" >&2
	flock 9
fi

# expected: seconds of each cold build, measured on a fresh 2-core machine busy with
# other builds (34 min 53 s in all; README); used only for the progress lines.
declare -A expected=([etcd]=36 [kube-apiserver]=1093 [kube-controller-manager]=584 [kube-scheduler]=45 [kwok]=335)

# elapsed SECONDS prints 4m05s.
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# remaining prints the expected seconds of the components of $want not built yet.
remaining() {
	local c n=0
	for c in "${want[@]}"; do
		[ -x "$dir/$c" ] || n=$((n + ${expected[$c]:-0}))
	done
	echo "$n"
}

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
	local name=$1 mod=$2 pkg=$3 ldflags=${4:-}
	[ -x "$dir/$name" ] && return 0
	local start=$SECONDS left total log
	left=$(remaining)
	echo "controlplane: building $name (cached afterwards in $dir); expected ~$(elapsed "${expected[$name]:-0}") for it, ~$(elapsed "$left") for what is left of this run (measured cold on 2 busy cores)" >&2
	log=$(mktemp)
	total=$(cd "$mod" && go list -deps "$pkg" 2>>"$log" | wc -l) || total=0
	# go build -v names each package as it compiles it: their count is the progress.
	(cd "$mod" && CGO_ENABLED=0 go build -v -trimpath -ldflags "-s -w $ldflags" -o "$dir/.$name.tmp" "$pkg") 2>>"$log" &
	local pid=$! next=$((SECONDS + 30)) rc=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		if [ "$SECONDS" -ge "$next" ]; then
			next=$((SECONDS + 30))
			local done_=$(grep -c -v -e '^go: ' -e '^#' "$log" || true)
			echo "controlplane: $name: ${done_}/${total} packages compiled, $(elapsed $((SECONDS - start))) so far (expected ~$(elapsed "${expected[$name]:-0}") for it, ~$(elapsed "$left") for this run)" >&2
		fi
	done
	wait "$pid" || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$log" >&2
		rm -f "$log"
		echo "controlplane: building $name failed (exit $rc)" >&2
		exit "$rc"
	fi
	rm -f "$log"
	mv "$dir/.$name.tmp" "$dir/$name"
	echo "controlplane: built $name in $(elapsed $((SECONDS - start)))" >&2
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
