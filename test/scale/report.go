package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Report holds the measurements of one run.
type Report struct {
	Config
	// Objects is N × M.
	Objects int
	// RuleSets is the number of rule set files applied (Config.Rules).
	RuleSets int
	// Setup is how long creating the objects took (not part of any figure).
	Setup time.Duration
	// Converge is observer start → every Release Healthy=True.
	Converge time.Duration
	// Syncs is the number of sync requests received during the converge.
	Syncs int64
	// ConvergeRequests and SteadyRequests count kube-apiserver requests by
	// "VERB resource[/subresource]"; SteadyWindow is the length of the second.
	ConvergeRequests, SteadyRequests counts
	SteadyWindow                     time.Duration
	// ConvergeReads counts the observer's target reads by source until converged,
	// SteadyReads during the steady window.
	ConvergeReads, SteadyReads counts
	// CPUConverge is the observer's CPU time until converged; CPUSteady during the
	// steady window; CPUTotal at the end.
	CPUConverge, CPUSteady, CPUTotal time.Duration
	// APIServerCPUConverge is the kube-apiserver's CPU time during the converge
	// (process_cpu_seconds_total): where the rest of the time goes on a small machine.
	APIServerCPUConverge time.Duration
	// RSSConverged is the resident set after the converge; PeakRSS the high-water mark.
	RSSConverged, PeakRSS uint64
	// EntryReaction and ConditionReaction: one sample per change (2 per K).
	EntryReaction, ConditionReaction []time.Duration
	// Namespaces is the number of namespaces (one Cluster each).
	Namespaces int
	// After the converge: TargetWatches is the number of open watches of target
	// objects (deployments) on the kube-apiserver, Goroutines the observer's
	// go_goroutines, HeapInuse its go_memstats_heap_inuse_bytes, Sockets the sockets it
	// holds open (/proc/pid/fd).
	TargetWatches       float64
	Goroutines, Sockets int
	HeapInuse           uint64
	// Passes is the observer's passes until converged (convoy_observer_passes_total,
	// every namespace); 0 for the floor client, which exports none.
	Passes float64
	// HeapLive is the observer's live heap right after a garbage collection, at the end
	// of the steady window (what it keeps, without the garbage of the converge); 0 when
	// its pprof endpoint did not answer.
	HeapLive uint64
}

// PerCluster divides v by the number of Clusters of the fleet mode (1 otherwise).
func (r *Report) PerCluster(v float64) float64 { return v / float64(max(r.Clusters, 1)) }

// counts maps a label to a counter value.
type counts map[string]float64

func (c counts) minus(o counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Sum adds the counts whose key has one of the prefixes (all when none).
func (c counts) Sum(prefixes ...string) float64 {
	s := 0.0
	for k, v := range c {
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			s += v
		}
	}
	return s
}

// TargetGets is the number of GETs of target objects (deployments) in the steady window.
func (r *Report) TargetGets() float64 { return r.SteadyRequests["GET deployments"] }

// ManagementWrites is the number of writes to Releases and inventories in the steady
// window.
func (r *Report) ManagementWrites() float64 {
	s := 0.0
	for k, v := range r.SteadyRequests {
		verb, res, _ := strings.Cut(k, " ")
		if verb != "GET" && verb != "LIST" && verb != "WATCH" && strings.HasPrefix(res, "release") {
			s += v
		}
	}
	return s
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + " ms"
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/(1<<10)) }

// RulesName describes the rule selection of the run.
func (r *Report) RulesName() string {
	if r.Rules == RulesLibrary {
		return fmt.Sprintf("%s (convoy-defaults, every set of health/library and health/generic.yaml: %d files)", r.Rules, r.RuleSets)
	}
	return r.Rules + " (health/convoy-defaults.yaml)"
}

// Table renders the report as a text table.
func (r *Report) Table() string {
	var b bytes.Buffer
	clusters := "the management cluster as every Release's target"
	if r.Clusters > 0 {
		clusters = fmt.Sprintf("C = %d remote Clusters (a kubeconfig Secret and a user each)", r.Clusters)
	}
	if r.Shards > 1 {
		clusters += fmt.Sprintf(", %d shards (one observer each: the process figures are their sums)", r.Shards)
	}
	if r.Floor {
		b.WriteString("## The floor client (test/scale/floorclient), not convoy-observer: the converge figures only\n")
	}
	fmt.Fprintf(&b, "## N = %d Releases × M = %d Deployments (%d objects), %d namespace(s), %s, K = %d changes, syncPolicy.interval %s, rules %s\n\n",
		r.Releases, r.Config.Objects, r.Objects, (r.Releases+r.PerNamespace-1)/r.PerNamespace, clusters, r.Changes, r.Interval, r.RulesName())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	perMin := func(v float64) float64 { return v * float64(time.Minute) / float64(r.SteadyWindow) }
	if r.Floor {
		fmt.Fprintf(w, "cold converge (all Healthy)\t%s\t(%d sync requests)\n", r.Converge.Round(10*time.Millisecond), r.Syncs)
		fmt.Fprintf(w, "floor client CPU / kube-apiserver CPU\t%s / %s\t\n", r.CPUConverge.Round(10*time.Millisecond),
			r.APIServerCPUConverge.Round(10*time.Millisecond))
		fmt.Fprintf(w, "floor client RSS: peak\t%s\t\n", mib(r.PeakRSS))
		fmt.Fprintf(w, "watches ended by the kube-apiserver (slow client)\t%.0f\t\n", r.WatchesEnded())
		_ = w.Flush()
		return b.String()
	}
	fmt.Fprintf(w, "cold converge (all Healthy)\t%s\t(%d sync requests)\n", r.Converge.Round(10*time.Millisecond), r.Syncs)
	fmt.Fprintf(w, "observer CPU: converge / steady\t%s / %s per minute\t(%.0f%% of a core while converging; kube-apiserver: %s, %.0f%%)\n",
		r.CPUConverge.Round(10*time.Millisecond), time.Duration(perMin(float64(r.CPUSteady))).Round(10*time.Millisecond),
		100*float64(r.CPUConverge)/float64(max(r.Converge, 1)),
		r.APIServerCPUConverge.Round(10*time.Millisecond), 100*float64(r.APIServerCPUConverge)/float64(max(r.Converge, 1)))
	perObj := uint64(0)
	if r.Objects > 0 {
		perObj = r.RSSConverged / uint64(r.Objects)
	}
	fmt.Fprintf(w, "observer RSS: converged / peak\t%s / %s\t(RSS / objects = %d bytes)\n", mib(r.RSSConverged), mib(r.PeakRSS), perObj)
	fmt.Fprintf(w, "reaction → entry state: p50 / p99 / max\t%s / %s / %s\t(%d changes)\n",
		ms(percentile(r.EntryReaction, .5)), ms(percentile(r.EntryReaction, .99)), ms(percentile(r.EntryReaction, 1)), len(r.EntryReaction))
	fmt.Fprintf(w, "reaction → Healthy condition: p50 / p99 / max\t%s / %s / %s\t\n",
		ms(percentile(r.ConditionReaction, .5)), ms(percentile(r.ConditionReaction, .99)), ms(percentile(r.ConditionReaction, 1)))
	fmt.Fprintf(w, "steady: target GETs / management writes per minute\t%.0f / %.0f\t\n", perMin(r.TargetGets()), perMin(r.ManagementWrites()))
	heapPerObj := uint64(0)
	if r.Objects > 0 {
		heapPerObj = r.HeapInuse / uint64(r.Objects)
	}
	fmt.Fprintf(w, "observer heap in use\t%s\t(heap / objects = %d bytes)\n", mib(r.HeapInuse), heapPerObj)
	if r.HeapLive > 0 && r.Objects > 0 {
		fmt.Fprintf(w, "observer live heap (after a GC, steady)\t%s\t(live heap / objects = %d bytes)\n", mib(r.HeapLive), r.HeapLive/uint64(r.Objects))
	}
	if r.Passes > 0 {
		fmt.Fprintf(w, "passes until converged\t%.0f\t(%.2f per Release)\n", r.Passes, r.Passes/float64(max(r.Releases, 1)))
	}
	fmt.Fprintf(w, "target watches / goroutines / sockets\t%.0f / %d / %d\t\n", r.TargetWatches, r.Goroutines, r.Sockets)
	if r.Clusters > 0 {
		fmt.Fprintf(w, "per Cluster (%d remote Clusters): RSS / heap / goroutines / watches\t%s / %s / %.1f / %.1f\t(whole process divided by C)\n",
			r.Clusters, kib(r.PerCluster(float64(r.RSSConverged))), kib(r.PerCluster(float64(r.HeapInuse))),
			r.PerCluster(float64(r.Goroutines)), r.PerCluster(r.TargetWatches))
	}
	_ = w.Flush()
	fmt.Fprintf(&b, "\n| API requests (kube-apiserver; WATCH (open) = watches opened, as a gauge; WATCH (ended: slow client) = watches the API server ended because their client, the observer or this benchmark, read too slowly) | during converge | per steady minute |\n|---|---:|---:|\n")
	keys := map[string]bool{}
	for k := range r.ConvergeRequests {
		keys[k] = true
	}
	for k := range r.SteadyRequests {
		keys[k] = true
	}
	delete(keys, cpuKey)
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		fmt.Fprintf(&b, "| %s | %.0f | %.1f |\n", k, r.ConvergeRequests[k], perMin(r.SteadyRequests[k]))
	}
	if len(r.ConvergeReads) > 0 {
		fmt.Fprintf(&b, "\nobserver target reads until converged by source:")
		for _, k := range sortedKeys(r.ConvergeReads) {
			fmt.Fprintf(&b, " %s=%.0f", k, r.ConvergeReads[k])
		}
		fmt.Fprintln(&b)
	}
	if len(r.SteadyReads) > 0 {
		fmt.Fprintf(&b, "\nobserver target reads in the steady window by source:")
		for _, k := range sortedKeys(r.SteadyReads) {
			fmt.Fprintf(&b, " %s=%.0f", k, r.SteadyReads[k])
		}
		fmt.Fprintln(&b)
	}
	return b.String()
}

func sortedKeys(c counts) []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cpuKey holds the kube-apiserver's CPU seconds among the request counts; Table and
// the checks skip it.
const cpuKey = "(cpu seconds)"

// watchEndedKey, followed by a resource, counts the watches of it that the
// kube-apiserver ended because their client read too slowly
// (apiserver_terminated_watchers_total): the client's next watch starts from its last
// resourceVersion, without a list.
const watchEndedKey = "WATCH (ended: slow client) "

// WatchesEnded is the number of watches the kube-apiserver ended during the converge
// because their client (the observer, the floor client or this benchmark) read too
// slowly.
func (r *Report) WatchesEnded() float64 { return r.ConvergeRequests.Sum(watchEndedKey) }

// apiRequests reads apiserver_request_total from the kube-apiserver, summed by
// "VERB resource[/subresource]" (the watch and list of the benchmark's own cache, the
// leader-election Lease and events included; they are few).
func apiRequests(ctx context.Context, cfg *rest.Config) (counts, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the kube-apiserver's metrics: %w", err)
	}
	fams, err := parse(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	out := counts{}
	for _, m := range fams["process_cpu_seconds_total"].GetMetric() {
		out[cpuKey] += m.GetCounter().GetValue()
	}
	// Watches are counted in apiserver_request_total when they end: count the open ones
	// as "WATCH (open) resource".
	for _, m := range fams["apiserver_longrunning_requests"].GetMetric() {
		l := labels(m)
		if l["verb"] == "WATCH" && l["resource"] != "" {
			out["WATCH (open) "+l["resource"]] += m.GetGauge().GetValue()
		}
	}
	// The watch cache ends a watch whose client falls behind: a watcher's buffer holds
	// about a second of the resource's events (at least 10), and an event that finds it
	// full waits a short budget, then the watch is closed. The client watches again
	// from its last resourceVersion.
	for _, m := range fams["apiserver_terminated_watchers_total"].GetMetric() {
		if res := labels(m)["resource"]; res != "" {
			out[watchEndedKey+res] += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := labels(m)
		if l["resource"] == "" {
			continue
		}
		k := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		out[k] += m.GetCounter().GetValue()
	}
	return out, nil
}

// observerReads reads convoy_observer_target_reads_total by source from the observer.
func observerReads(ctx context.Context, url string) (counts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	fams, err := parse(resp.Body)
	if err != nil {
		return nil, err
	}
	out := counts{}
	for _, m := range fams["convoy_observer_target_reads_total"].GetMetric() {
		out[labels(m)["source"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

// process is what the observer's own metrics say of its process.
type process struct {
	goroutines int
	heapInuse  uint64
	passes     float64
}

// observerProcess reads go_goroutines, go_memstats_heap_inuse_bytes and the sum of
// convoy_observer_passes_total from the observer.
func observerProcess(ctx context.Context, url string) (process, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return process{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return process{}, err
	}
	defer resp.Body.Close()
	fams, err := parse(resp.Body)
	if err != nil {
		return process{}, err
	}
	var p process
	for _, m := range fams["go_goroutines"].GetMetric() {
		p.goroutines = int(m.GetGauge().GetValue())
	}
	for _, m := range fams["go_memstats_heap_inuse_bytes"].GetMetric() {
		p.heapInuse = uint64(m.GetGauge().GetValue())
	}
	for _, m := range fams["convoy_observer_passes_total"].GetMetric() {
		p.passes += m.GetCounter().GetValue()
	}
	return p, nil
}

// liveHeap makes the observer collect its garbage and returns the bytes of the objects
// that the collection found live: the inuse_space of its heap profile (gc=1), which the
// allocations of the passes running meanwhile do not inflate (go_memstats_heap_alloc_bytes
// read a moment later does) and which leaves out the free parts of the spans in use
// (go_memstats_heap_inuse_bytes).
func liveHeap(ctx context.Context, pprofAddr string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("pprof heap: %s", resp.Status)
	}
	prof, err := profile.Parse(resp.Body)
	if err != nil {
		return 0, err
	}
	index := -1
	for i, st := range prof.SampleType {
		if st.Type == "inuse_space" {
			index = i
		}
	}
	if index < 0 {
		return 0, fmt.Errorf("pprof heap: no inuse_space")
	}
	var total int64
	for _, s := range prof.Sample {
		total += s.Value[index]
	}
	return uint64(total), nil
}

// sockets counts the sockets among pid's open files (/proc/pid/fd): its connections,
// to the API server and others, and its listeners.
func sockets(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n, nil
}

func parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// cpuTime returns the user+system CPU time of pid (/proc/pid/stat, clock ticks of
// 1/100 s).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}

// procStatus returns a size field of /proc/pid/status (VmRSS, VmHWM) in bytes.
func procStatus(pid int, field string) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
