package main

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// A mistyped command is a usage error that names what it resembles.
func TestMistypedCommandsSuggest(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"jobz list": `unknown command "jobz" for "lancemaster"; did you mean jobs?`,
		"jobs lst":  `unknown command "lst" for "lancemaster jobs"; did you mean list?`,
	} {
		_, errOut, code := runCLI(t, nil, strings.Fields(args)...)
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// Every global flag has an environment variable; a flag beats it.
func TestGlobalFlagsHaveEnvironmentVariables(t *testing.T) {
	t.Parallel()
	addr := serve(t, &fakeMaster{})
	env := map[string]string{envAddress: addr, envOutput: "json", envTimeout: "7s", envAs: "bob"}
	out := mustOK(t)(runCLI(t, env, "jobs", "list"))
	if out != "{\n  \"jobs\": []\n}\n" {
		t.Errorf("LANCEMASTER_OUTPUT=json: %q", out)
	}
	if out := mustOK(t)(runCLI(t, env, "-o", "table", "jobs", "list")); !strings.HasPrefix(out, "ID") {
		t.Errorf("-o table beats the environment: %q", out)
	}
	if _, errOut, code := runCLI(t, map[string]string{envAddress: addr, envTimeout: "soon"}, "jobs", "list"); code != exitUsage ||
		!strings.Contains(errOut, envTimeout) {
		t.Errorf("a bad LANCEMASTER_TIMEOUT: exit %d, stderr %q", code, errOut)
	}
}

// -o yaml is the JSON document in YAML; --no-headers drops a table's header.
func TestYAMLOutputAndNoHeaders(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: testJobs()}}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "-o", "yaml", "jobs", "list"))
	if !strings.HasPrefix(out, "jobs:\n  - ") || !strings.Contains(out, "job_id: 1\n") || !strings.Contains(out, "mutation_state: RUNNING\n") ||
		!strings.Contains(out, "update_time_ms: 1700000000000\n") {
		t.Errorf("yaml:\n%s", out)
	}
	out = mustOK(t)(cli(t, addr, "--no-headers", "jobs", "list"))
	if strings.HasPrefix(out, "ID") || !strings.HasPrefix(out, "1 ") {
		t.Errorf("--no-headers:\n%s", out)
	}
}

// Completion: job ids (with what they are) from the master, option keys
// from the binary.
func TestDynamicCompletion(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: testJobs()}}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "__complete", "jobs", "show", ""))
	if !strings.Contains(out, "1\tCREATE emb_idx RUNNING\n") || !strings.Contains(out, "2\tDROP old_idx UNKNOWN\n") {
		t.Errorf("job ids:\n%s", out)
	}
	out = mustOK(t)(runCLI(t, nil, "__complete", "config", "get", "lance_index_job_dispatcher"))
	if !strings.HasPrefix(out, "lance_index_job_dispatcher_paused\n") {
		t.Errorf("option keys:\n%s", out)
	}
	if out := mustOK(t)(runCLI(t, nil, "completion", "bash")); !strings.Contains(out, "__start_lancemaster") {
		t.Errorf("completion bash printed %d bytes without the start function", len(out))
	}
}

// The daemons' help lists their own flags and the TLS overrides, not the
// operator CLI's --address, --output, --timeout or --as.
func TestDaemonHelpHidesClientFlags(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"serve", "backend"} {
		out := mustOK(t)(runCLI(t, nil, d, "--help"))
		for _, f := range []string{"--address", "--output", "--no-headers", "--timeout ", "--as "} {
			if strings.Contains(out, f) {
				t.Errorf("%s --help lists %s", d, f)
			}
		}
		if !strings.Contains(out, "--tls-ca") || !strings.Contains(out, "--config") {
			t.Errorf("%s --help lost its own flags:\n%s", d, out)
		}
	}
	if out := mustOK(t)(runCLI(t, nil, "jobs", "list", "--help")); !strings.Contains(out, "--address") {
		t.Error("jobs list --help lost --address")
	}
}

// -o name prints one kind/name line per resource, for scripts.
func TestOutputName(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: testJobs()}}, job: &adminapi.TJobView{JobID: 1}}
	addr := serve(t, f)
	if out := mustOK(t)(cli(t, addr, "-o", "name", "jobs", "list")); out != "job/1\njob/2\n" {
		t.Errorf("jobs list -o name: %q", out)
	}
	if out := mustOK(t)(cli(t, addr, "-o", "name", "jobs", "show", "1")); out != "job/1\n" {
		t.Errorf("jobs show -o name: %q", out)
	}
}
