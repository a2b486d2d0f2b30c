package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// The names of the demo's objects in the target cluster.
const (
	demoNamespace = "demo"
	pvName        = "convoy-demo-data"
	pvcName       = "data"
	stsName       = "db"
	deployName    = "web"
	dsName        = "agent"
	hookName      = "db-migrate"
	hookJobName   = "db-migrate"
)

// badNodeSelector is the node selector of the bad render: no fake node has this label,
// so the new Pods of the Deployment stay Pending.
var badNodeSelector = map[string]string{"convoy.kumodo.io/pool": "gpu-xl"}

// object is one object of a render: the apply configuration sent to the target cluster
// and the keys under which the controller-manager records it in the ReleaseInventory.
type object struct {
	Wave                           int32
	Group, Version, Kind, Resource string
	Namespace, Name                string
	Apply                          runtime.ApplyConfiguration
}

// hookSpec is a lifecycle hook of a render: a Job that runs after the waves before
// AfterWave and before the next one.
type hookSpec struct {
	Name      string
	AfterWave int32
	Timeout   time.Duration
	Job       *batchv1ac.JobApplyConfiguration
}

// render is what the demo's "controller-manager" applies for one renderRef: the
// stand-in for a rendered source.
type render struct {
	Ref     string
	Objects []object
	Hooks   []hookSpec
	// expect says what the last wave waits for when it is not Healthy ("": the
	// deadline's Degraded of r2).
	expect string
}

// wave returns the objects of wave w.
func (r *render) wave(w int32) []object {
	var out []object
	for _, o := range r.Objects {
		if o.Wave == w {
			out = append(out, o)
		}
	}
	return out
}

// lastWave returns the highest wave of the render.
func (r *render) lastWave() int32 {
	var last int32
	for _, o := range r.Objects {
		last = max(last, o.Wave)
	}
	return last
}

// goodRender is r1: wave 0 is storage (a PersistentVolume and a claim bound to it) and
// a StatefulSet using it, then the hook db-migrate (a Job), then wave 1: a Deployment of
// three replicas and a DaemonSet.
func goodRender(ref string) *render {
	return &render{Ref: ref, Objects: objects("1", nil, nil), Hooks: []hookSpec{{
		Name: hookName, AfterWave: 0, Timeout: 2 * time.Minute,
		Job: batchv1ac.Job(hookJobName, demoNamespace).
			WithLabels(labels(hookJobName)).
			WithSpec(batchv1ac.JobSpec().
				WithBackoffLimit(0).
				WithTemplate(podTemplate(hookJobName, podSpec(hookJobName, "example.com/convoy-demo/db-migrate:1").
					WithRestartPolicy(corev1.RestartPolicyNever)))),
	}}}
}

// badRender is r2: the same objects, but the Deployment's new version asks for nodes
// labelled convoy.kumodo.io/pool=gpu-xl, which no node has. Its new Pods stay Pending,
// so its rollout never completes; the old Pods keep serving.
func badRender(ref string) *render {
	return &render{Ref: ref, Objects: objects("2", badNodeSelector, nil)}
}

// objects returns the five objects of a render; webVersion, webNodeSelector and
// webPodLabels (added to the template's labels) shape the Deployment's Pods.
func objects(webVersion string, webNodeSelector, webPodLabels map[string]string) []object {
	storage := resource.MustParse("1Gi")
	pv := corev1ac.PersistentVolume(pvName).
		WithLabels(labels(pvName)).
		WithSpec(corev1ac.PersistentVolumeSpec().
			WithCapacity(corev1.ResourceList{corev1.ResourceStorage: storage}).
			WithAccessModes(corev1.ReadWriteOnce).
			WithPersistentVolumeReclaimPolicy(corev1.PersistentVolumeReclaimRetain).
			WithStorageClassName("").
			WithHostPath(corev1ac.HostPathVolumeSource().WithPath("/var/lib/convoy-demo/data")))
	pvc := corev1ac.PersistentVolumeClaim(pvcName, demoNamespace).
		WithLabels(labels(pvcName)).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().
			WithAccessModes(corev1.ReadWriteOnce).
			WithStorageClassName(""). // no dynamic provisioning: bind to the PV below
			WithVolumeName(pvName).
			WithResources(corev1ac.VolumeResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceStorage: storage})))
	dbImage := "example.com/convoy-demo/db:1"
	sts := appsv1ac.StatefulSet(stsName, demoNamespace).
		WithLabels(labels(stsName)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(stsName).
			WithSelector(selector(stsName)).
			WithTemplate(podTemplate(stsName, podSpec(stsName, dbImage).
				WithVolumes(corev1ac.Volume().WithName("data").
					WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(pvcName))))))
	webSpec := podSpec(deployName, "example.com/convoy-demo/web:"+webVersion)
	if len(webNodeSelector) > 0 {
		webSpec.WithNodeSelector(webNodeSelector)
	}
	webTemplate := podTemplate(deployName, webSpec)
	if len(webPodLabels) > 0 {
		webTemplate.WithLabels(webPodLabels)
	}
	web := appsv1ac.Deployment(deployName, demoNamespace).
		WithLabels(labels(deployName)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(3).
			WithSelector(selector(deployName)).
			WithTemplate(webTemplate))
	agent := appsv1ac.DaemonSet(dsName, demoNamespace).
		WithLabels(labels(dsName)).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(selector(dsName)).
			WithTemplate(podTemplate(dsName, podSpec(dsName, "example.com/convoy-demo/agent:1"))))
	return []object{
		{Wave: 0, Version: "v1", Kind: "PersistentVolume", Resource: "persistentvolumes", Name: pvName, Apply: pv},
		{Wave: 0, Version: "v1", Kind: "PersistentVolumeClaim", Resource: "persistentvolumeclaims", Namespace: demoNamespace, Name: pvcName, Apply: pvc},
		{Wave: 0, Group: "apps", Version: "v1", Kind: "StatefulSet", Resource: "statefulsets", Namespace: demoNamespace, Name: stsName, Apply: sts},
		{Wave: 1, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: demoNamespace, Name: deployName, Apply: web},
		{Wave: 1, Group: "apps", Version: "v1", Kind: "DaemonSet", Resource: "daemonsets", Namespace: demoNamespace, Name: dsName, Apply: agent},
	}
}

// labels are the labels of the demo's object name.
func labels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "convoy-demo"}
}

func selector(name string) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app.kubernetes.io/name": name})
}

// podTemplate is a template of Pods labelled for name.
func podTemplate(name string, spec *corev1ac.PodSpecApplyConfiguration) *corev1ac.PodTemplateSpecApplyConfiguration {
	return corev1ac.PodTemplateSpec().WithLabels(labels(name)).WithSpec(spec)
}

// podSpec is a Pod spec with one container running image. kwok never pulls images nor
// runs containers, so the images need not exist. No service-account token is mounted:
// the local cluster runs no token controller.
func podSpec(name, image string) *corev1ac.PodSpecApplyConfiguration {
	return corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithContainers(corev1ac.Container().WithName(name).WithImage(image))
}
