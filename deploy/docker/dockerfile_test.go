// Package docker holds the images' Dockerfiles; its test checks them
// against the rest of the repository (no Docker needed).
package docker

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type instruction struct {
	cmd, args string
}

// parseDockerfile returns the instructions of path, continuation lines
// joined and comments dropped, split into stages at each FROM.
func parseDockerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var pre []instruction // ARGs before the first FROM
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")}
		switch {
		case in.cmd == "FROM":
			stages = append(stages, []instruction{in})
		case len(stages) == 0:
			pre = append(pre, in)
		default:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	if len(stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return append([][]instruction{pre}, stages...)
}

func find(stage []instruction, cmd, contains string) int {
	return slices.IndexFunc(stage, func(in instruction) bool { return in.cmd == cmd && strings.Contains(in.args, contains) })
}

// workload reads deploy/kubernetes/FILE and returns the container ports
// and runAsUser of its one workload, and its config file's worker argv.
func workload(t *testing.T, file string) (ports []string, user int64, worker []string) {
	t.Helper()
	b, err := os.ReadFile("../kubernetes/" + file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
			Spec struct {
				Template struct {
					Spec struct {
						SecurityContext struct {
							RunAsUser int64 `yaml:"runAsUser"`
						} `yaml:"securityContext"`
						Containers []struct {
							Ports []struct {
								ContainerPort int `yaml:"containerPort"`
							} `yaml:"ports"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if dec.Decode(&doc) != nil {
			return ports, user, worker
		}
		if cfg, ok := doc.Data["backend.yaml"]; ok {
			var bc struct {
				Worker []string `yaml:"worker"`
			}
			if err := yaml.Unmarshal([]byte(cfg), &bc); err != nil {
				t.Fatal(err)
			}
			worker = bc.Worker
		}
		if doc.Kind == "StatefulSet" || doc.Kind == "Deployment" {
			user = doc.Spec.Template.Spec.SecurityContext.RunAsUser
			for _, p := range doc.Spec.Template.Spec.Containers[0].Ports {
				ports = append(ports, strconv.Itoa(p.ContainerPort))
			}
		}
	}
}

// Both images build the binary statically with make build and install it
// where the manifests and docs say, run as the manifests' user, and expose
// the ports the manifests name; the backend image has Node 20 and the
// builder installed from its lock file at the path the worker argv names.
func TestDockerfiles(t *testing.T) {
	for _, tc := range []struct{ image, manifest string }{{"master", "masters.yaml"}, {"backend", "backends.yaml"}} {
		stages := parseDockerfile(t, tc.image+".Dockerfile")
		last := stages[len(stages)-1]
		build := slices.IndexFunc(stages, func(s []instruction) bool {
			return find(s, "RUN", "CGO_ENABLED=0 make build BIN=/out/lancemaster") >= 0
		})
		if build < 1 || !strings.HasSuffix(stages[build][0].args, " AS build") {
			t.Fatalf("%s: no stage named build runs CGO_ENABLED=0 make build BIN=/out/lancemaster", tc.image)
		}
		if find(last, "COPY", "--from=build /out/lancemaster /usr/local/bin/lancemaster") < 0 {
			t.Errorf("%s: the final stage does not install the binary at /usr/local/bin/lancemaster", tc.image)
		}
		if find(last, "ENTRYPOINT", `["/usr/local/bin/lancemaster"]`) < 0 {
			t.Errorf("%s: the entrypoint is not /usr/local/bin/lancemaster", tc.image)
		}
		ports, user, worker := workload(t, tc.manifest)
		if i := find(last, "USER", strconv.FormatInt(user, 10)+":"); user == 0 || i < 0 {
			t.Errorf("%s: USER is not the manifest's runAsUser %d", tc.image, user)
		}
		if i := find(last, "EXPOSE", ""); i < 0 || !slices.Equal(strings.Fields(last[i].args), ports) {
			t.Errorf("%s: EXPOSE differs from the manifest's container ports %v", tc.image, ports)
		}
		if tc.image != "backend" {
			continue
		}
		if find(stages[0], "ARG", "NODE_VERSION=20") < 0 || !strings.HasPrefix(last[0].args, "node:${NODE_VERSION}") {
			t.Errorf("backend: the final image is not node:20")
		}
		const dir = "/opt/lancemaster/builders/lancedb"
		if !slices.Equal(worker, []string{"node", dir + "/builder.js"}) {
			t.Fatalf("backends.yaml worker = %v, want [node %s/builder.js]", worker, dir)
		}
		if _, err := os.Stat("../../builders/lancedb/builder.js"); err != nil {
			t.Fatal(err)
		}
		b := slices.IndexFunc(stages, func(s []instruction) bool { return find(s, "WORKDIR", dir) >= 0 })
		if b < 1 {
			t.Fatalf("backend: no stage works in %s", dir)
		}
		lock, ci, js := find(stages[b], "COPY", "builders/lancedb/package-lock.json"), find(stages[b], "RUN", "npm ci"),
			find(stages[b], "COPY", "builders/lancedb/*.js")
		if lock < 0 || ci < lock || js < 0 {
			t.Errorf("backend: the builder stage must copy package-lock.json, then npm ci, and copy the builder's .js files")
		}
		name := stages[b][0].args[strings.LastIndex(stages[b][0].args, " ")+1:]
		if find(last, "COPY", "--from="+name+" "+dir+" "+dir) < 0 {
			t.Errorf("backend: the final stage does not copy %s from the %s stage", dir, name)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deploy/docker/master.Dockerfile", "deploy/docker/backend.Dockerfile"} {
		if !strings.Contains(string(mk), "-f "+f) {
			t.Errorf("make image does not build %s", f)
		}
	}
}
