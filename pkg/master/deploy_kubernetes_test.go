package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/config"
)

const k8sDir = "../../deploy/kubernetes"

// k8sObjects holds every object of deploy/kubernetes's manifests, decoded
// strictly (an unknown or misspelt field fails) into the real API types.
type k8sObjects struct {
	configMaps map[string]*corev1.ConfigMap
	services   []*corev1.Service
	pods       map[string]*corev1.PodTemplateSpec // by workload name
	policies   []*networkingv1.NetworkPolicy
}

// yamlDocs splits a multi-document YAML file into JSON documents.
func yamlDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs [][]byte
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc == nil {
			continue
		}
		j, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, j)
	}
}

// decodeStrictJSON decodes as the API server does, strictly: field names
// case-sensitive (encoding/json would take startupprobe for startupProbe),
// no unknown or duplicate field.
func decodeStrictJSON(t *testing.T, where string, doc []byte, into any) {
	t.Helper()
	strict, err := kjson.UnmarshalStrict(doc, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// decodeYAMLStrict decodes one YAML document with no unknown field.
func decodeYAMLStrict(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadK8s(t *testing.T) k8sObjects {
	t.Helper()
	var kust struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Resources  []string `yaml:"resources"`
	}
	decodeYAMLStrict(t, filepath.Join(k8sDir, "kustomization.yaml"), &kust)
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	if got := slices.Sorted(slices.Values(kust.Resources)); !slices.Equal(got, want) {
		t.Fatalf("kustomization resources %v, want every manifest %v", got, want)
	}
	o := k8sObjects{configMaps: map[string]*corev1.ConfigMap{}, pods: map[string]*corev1.PodTemplateSpec{}}
	for _, f := range kust.Resources {
		for i, doc := range yamlDocs(t, filepath.Join(k8sDir, f)) {
			var meta struct{ APIVersion, Kind string }
			if err := json.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			where := f + " #" + string(rune('0'+i)) + " " + meta.Kind
			switch meta.APIVersion + " " + meta.Kind {
			case "v1 Namespace":
				decodeStrictJSON(t, where, doc, &corev1.Namespace{})
			case "v1 PersistentVolumeClaim":
				decodeStrictJSON(t, where, doc, &corev1.PersistentVolumeClaim{})
			case "policy/v1 PodDisruptionBudget":
				decodeStrictJSON(t, where, doc, &policyv1.PodDisruptionBudget{})
			case "v1 ConfigMap":
				var cm corev1.ConfigMap
				decodeStrictJSON(t, where, doc, &cm)
				o.configMaps[cm.Name] = &cm
			case "v1 Service":
				var s corev1.Service
				decodeStrictJSON(t, where, doc, &s)
				o.services = append(o.services, &s)
			case "apps/v1 StatefulSet":
				var s appsv1.StatefulSet
				decodeStrictJSON(t, where, doc, &s)
				o.pods[s.Name] = &s.Spec.Template
			case "apps/v1 Deployment":
				var d appsv1.Deployment
				decodeStrictJSON(t, where, doc, &d)
				o.pods[d.Name] = &d.Spec.Template
			case "networking.k8s.io/v1 NetworkPolicy":
				var p networkingv1.NetworkPolicy
				decodeStrictJSON(t, where, doc, &p)
				o.policies = append(o.policies, &p)
			default:
				t.Fatalf("%s: %s %s is not checked by this test: add it", where, meta.APIVersion, meta.Kind)
			}
		}
	}
	return o
}

// tlsPaths reads the tls section of a pod's config file from its ConfigMap
// with the real loaders, so the manifests cannot drift from the schema.
func tlsPaths(t *testing.T, o k8sObjects, pod *corev1.PodTemplateSpec) []string {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := o.configMaps[v.ConfigMap.Name]
		if cm == nil {
			t.Fatalf("configMap %s is not in the manifests", v.ConfigMap.Name)
		}
		if data, ok := cm.Data["master.yaml"]; ok {
			n, err := config.ParseNode([]byte(data))
			if err != nil {
				t.Fatalf("%s master.yaml: %v", cm.Name, err)
			}
			n.NodeID = n.Peers[0].ID // --node-id=$(POD_NAME)
			if err := n.Validate(); err != nil {
				t.Fatalf("%s master.yaml: %v", cm.Name, err)
			}
			return []string{n.TLS.CA, n.TLS.Cert, n.TLS.Key}
		}
		if data, ok := cm.Data["backend.yaml"]; ok {
			b, err := backend.ParseFileConfig([]byte(data))
			if err != nil {
				t.Fatalf("%s backend.yaml: %v", cm.Name, err)
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("%s backend.yaml: %v", cm.Name, err)
			}
			return []string{b.TLS.CA, b.TLS.Cert, b.TLS.Key}
		}
	}
	t.Fatal("no config file in the pod's ConfigMaps")
	return nil
}

// Every manifest decodes strictly into the real Kubernetes API types; each
// workload runs mutual TLS from a Secret mounted whole (so rotation
// reaches the pod) at the paths its config file names, and has startup,
// liveness and readiness probes.
func TestKubernetesManifests(t *testing.T) {
	o := loadK8s(t)
	if len(o.pods) != 2 || len(o.policies) != 2 {
		t.Fatalf("%d workloads and %d network policies, want 2 and 2", len(o.pods), len(o.policies))
	}
	for name, pod := range o.pods {
		c := pod.Spec.Containers[0]
		if c.StartupProbe == nil || c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s: a startup, liveness and readiness probe are all needed", name)
		}
		// Under mutual TLS a master's HTTP listener serves TLS; a backend's
		// stays plain HTTP.
		scheme := corev1.URISchemeHTTP
		if pod.Labels["app.kubernetes.io/component"] == "master" {
			scheme = corev1.URISchemeHTTPS
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if p != nil && (p.HTTPGet == nil || p.HTTPGet.Scheme != scheme && (scheme != corev1.URISchemeHTTP || p.HTTPGet.Scheme != "")) {
				t.Errorf("%s: a probe is not an HTTP GET with scheme %s", name, scheme)
			}
		}
		paths := tlsPaths(t, o, pod)
		for _, p := range paths {
			if p == "" {
				t.Fatalf("%s: the config file has no complete tls section", name)
			}
			var mount *corev1.VolumeMount
			for i, m := range c.VolumeMounts {
				if filepath.Dir(p) == m.MountPath {
					mount = &c.VolumeMounts[i]
				}
			}
			if mount == nil || mount.SubPath != "" {
				t.Fatalf("%s: %s is not in a volume mounted whole (%+v)", name, p, mount)
			}
			var secret *corev1.SecretVolumeSource
			for _, v := range pod.Spec.Volumes {
				if v.Name == mount.Name {
					secret = v.Secret
				}
			}
			if secret == nil || secret.Optional != nil && *secret.Optional || secret.DefaultMode == nil || *secret.DefaultMode&0o077 != 0 {
				t.Fatalf("%s: %s must come from a required Secret readable by its owner only (%+v)", name, p, secret)
			}
		}
	}
}

// The masters' raft port and the backends' dispatch port admit masters
// only; the masters' RPC port admits masters, backends and operator pods;
// every port a policy names is a port of the pods it selects.
func TestKubernetesNetworkPolicies(t *testing.T) {
	o := loadK8s(t)
	component := func(ls map[string]string) string { return ls["app.kubernetes.io/component"] }
	for _, p := range o.policies {
		var pod *corev1.PodTemplateSpec
		for _, tmpl := range o.pods {
			if component(tmpl.Labels) == component(p.Spec.PodSelector.MatchLabels) {
				pod = tmpl
			}
		}
		if pod == nil || !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Fatalf("%s: selects no workload, or is not an ingress policy", p.Name)
		}
		ports := map[string]bool{}
		for _, cp := range pod.Spec.Containers[0].Ports {
			ports[cp.Name] = true
		}
		for _, rule := range p.Spec.Ingress {
			var from []string
			for _, peer := range rule.From {
				switch {
				case peer.PodSelector != nil && peer.NamespaceSelector == nil && peer.IPBlock == nil:
					if c := component(peer.PodSelector.MatchLabels); c != "" {
						from = append(from, c)
					} else if peer.PodSelector.MatchLabels["lancemaster.io/role"] == "operator" {
						from = append(from, "operator")
					} else {
						t.Fatalf("%s: a peer selector that is no lancemaster role: %v", p.Name, peer.PodSelector)
					}
				case peer.NamespaceSelector != nil && peer.PodSelector == nil:
					from = append(from, "ns:"+peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				default:
					t.Fatalf("%s: an unexpected peer %+v", p.Name, peer)
				}
			}
			if len(from) == 0 {
				t.Fatalf("%s: a rule open to everyone", p.Name)
			}
			for _, port := range rule.Ports {
				name := port.Port.String()
				if !ports[name] {
					t.Errorf("%s: port %s is no named port of the %s pods", p.Name, name, component(pod.Labels))
				}
				allowed := map[string][]string{"raft": {"master"}, "thrift": {"master"},
					"rpc": {"master", "backend", "operator"}, "http": {"ns:monitoring"}}[name]
				for _, f := range from {
					if !slices.Contains(allowed, f) {
						t.Errorf("%s: %s may reach port %s; only %v may", p.Name, f, name, allowed)
					}
				}
			}
		}
	}
}

// The ServiceMonitor (a CRD, so no API type here) has the fields
// prometheus-operator requires and selects the masters' headless Service
// and the backends' Services by a port they have.
func TestKubernetesServiceMonitor(t *testing.T) {
	var sm struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			NamespaceSelector struct {
				MatchNames []string `yaml:"matchNames"`
			} `yaml:"namespaceSelector"`
			Endpoints []struct {
				Port      string `yaml:"port"`
				Path      string `yaml:"path"`
				Interval  string `yaml:"interval"`
				Scheme    string `yaml:"scheme"`
				TLSConfig *struct {
					CA struct {
						Secret struct {
							Name string `yaml:"name"`
							Key  string `yaml:"key"`
						} `yaml:"secret"`
					} `yaml:"ca"`
					ServerName string `yaml:"serverName"`
				} `yaml:"tlsConfig"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	decodeYAMLStrict(t, filepath.Join(k8sDir, "monitoring", "servicemonitor.yaml"), &sm)
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" || sm.Metadata.Name == "" ||
		len(sm.Spec.Selector.MatchLabels) == 0 || len(sm.Spec.Endpoints) == 0 {
		t.Fatalf("servicemonitor.yaml lacks a required field: %+v", sm)
	}
	o := loadK8s(t)
	scraped := map[string]bool{}
	for _, s := range o.services {
		match := s.Namespace == sm.Metadata.Namespace || slices.Contains(sm.Spec.NamespaceSelector.MatchNames, s.Namespace)
		for k, v := range sm.Spec.Selector.MatchLabels {
			match = match && s.Labels[k] == v
		}
		if !match {
			continue
		}
		// Each Service is scraped by the endpoints naming a port it has:
		// the masters' (mutual TLS: their listener serves TLS) over https
		// with the cluster CA and a name their certificates carry, the
		// backends' over http.
		master := s.Labels["app.kubernetes.io/component"] == "master"
		n := 0
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "/metrics" {
				t.Errorf("endpoint path %q, want /metrics", ep.Path)
			}
			if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				continue
			}
			n++
			tlsOK := ep.Scheme == "https" && ep.TLSConfig != nil && ep.TLSConfig.CA.Secret.Name == "lancemaster-master-tls" &&
				ep.TLSConfig.CA.Secret.Key == "ca.crt" && ep.TLSConfig.ServerName != ""
			if master != tlsOK {
				t.Errorf("service %s (master %v) is scraped by port %s with scheme %q: the masters need https with the CA, the backends http",
					s.Name, master, ep.Port, ep.Scheme)
			}
		}
		if n == 0 {
			t.Errorf("no endpoint scrapes a port of service %s", s.Name)
		}
		scraped[s.Labels["app.kubernetes.io/component"]] = true
		if s.Spec.ClusterIP != corev1.ClusterIPNone && strings.HasPrefix(s.Name, "lancemaster-master") {
			t.Errorf("the masters are scraped through %s, which is not the headless Service (one pod of three)", s.Name)
		}
	}
	if !scraped["master"] || !scraped["backend"] {
		t.Fatalf("the ServiceMonitor scrapes %v, want the masters and the backends", scraped)
	}
}
