package main

import "testing"

// A profile of the reports window needs that window, and is the run's only
// CPU profile.
func TestCPUProfileReportsIsTheRunsOnlyCPUProfileAndNeedsReports(t *testing.T) {
	cases := []struct {
		name   string
		o      options
		wantOK bool
	}{
		{"none", options{only: map[string]bool{secAdmission: true}}, true},
		{"whole run", options{cpuprof: "a", only: map[string]bool{secAdmission: true}}, true},
		{"reports window", options{reportsProf: "r", only: map[string]bool{secReports: true}}, true},
		{"both", options{cpuprof: "a", reportsProf: "r", only: map[string]bool{secReports: true}}, false},
		{"no reports section", options{reportsProf: "r", only: map[string]bool{secDispatch: true}}, false},
	}
	for _, c := range cases {
		if err := checkProfiles(&c.o); (err == nil) != c.wantOK {
			t.Errorf("%s: checkProfiles = %v, want ok %t", c.name, err, c.wantOK)
		}
	}
}
