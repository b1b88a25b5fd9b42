package job

import "testing"

func TestCanonicalUUID(t *testing.T) {
	for in, want := range map[string]string{
		"93b84c52-b470-46bd-bde2-5cc7c768a4ff": "93b84c52-b470-46bd-bde2-5cc7c768a4ff",
		"93B84C52-B470-46BD-BDE2-5CC7C768A4FF": "93b84c52-b470-46bd-bde2-5cc7c768a4ff",
	} {
		if got, ok := CanonicalUUID(in); !ok || got != want {
			t.Errorf("CanonicalUUID(%q) = %q %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "93b84c52b47046bdbde25cc7c768a4ff", "93b84c52-b470-46bd-bde2-5cc7c768a4fg",
		"93b84c52-b470-46bd-bde2-5cc7c768a4ff0", "93b84c52_b470-46bd-bde2-5cc7c768a4ff"} {
		if _, ok := CanonicalUUID(bad); ok {
			t.Errorf("CanonicalUUID(%q) accepted", bad)
		}
	}
}

func TestSecretMatchesAndWireReasons(t *testing.T) {
	s, other := "s3cret", "s3creT"
	if !SecretMatches(&s, "s3cret") || SecretMatches(&other, "s3cret") || SecretMatches(nil, "s3cret") || SecretMatches(&s, "") {
		t.Fatal("SecretMatches")
	}
	if !ReasonNone.IsWire() || !ReasonIfConditionNoop.IsWire() || ReasonResolvedFromDataset.IsWire() || CompletionReason(9).IsWire() {
		t.Fatal("CompletionReason.IsWire")
	}
}
