package raftfsm

import (
	"bytes"
	"io"
	"maps"
	"testing"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

func memberCmd(id, addr string) *journal.TMemberAddressCommand {
	return &journal.TMemberAddressCommand{NowMs: 1, NodeID: id, RPCAddress: addr}
}

// The address book: set, replace, forget (each idempotent), bad input
// refused with nothing changed, and carried through a snapshot into a new
// replica, byte for byte.
func TestMemberAddressBook(t *testing.T) {
	h := newHarness(t)
	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m4", "10.0.0.4:9090")), journal.TApplyCode_OK)
	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m5", "[fd00::5]:9090")), journal.TApplyCode_OK)
	if a, ok := h.st().MemberAddress("m4"); !ok || a != "10.0.0.4:9090" {
		t.Fatalf("m4 = %q %v", a, ok)
	}
	before := h.st()
	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m4", "10.0.0.4:9090")), journal.TApplyCode_OK)
	h.unchanged(before)
	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m4", "10.0.0.44:9090")), journal.TApplyCode_OK)
	if a, _ := h.st().MemberAddress("m4"); a != "10.0.0.44:9090" {
		t.Fatalf("m4 not replaced: %q", a)
	}
	if a, _ := before.MemberAddress("m4"); a != "10.0.0.4:9090" {
		t.Fatal("a published state changed")
	}
	for _, bad := range []*journal.TMemberAddressCommand{
		memberCmd("", "10.0.0.4:9090"), memberCmd("m 4", "10.0.0.4:9090"), memberCmd("m4", "10.0.0.4"),
		memberCmd("m4", ":9090"), memberCmd("m4", string(bytes.Repeat([]byte("h"), 300))+":1"),
	} {
		before := h.st()
		wantCode(t, h.apply(CmdSetMemberAddress, bad), journal.TApplyCode_INVALID)
		h.unchanged(before)
	}

	// Through a snapshot into a fresh replica: the same book, the same bytes.
	var buf bytes.Buffer
	if err := h.st().WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	f := New(zap.NewNop())
	if err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got, want := f.State().MemberAddresses(), h.st().MemberAddresses(); !maps.Equal(got, want) || len(got) != 2 {
		t.Fatalf("restored book %v, want %v", got, want)
	}
	if !bytes.Equal(snapshotBytes(t, f.State()), snapshotBytes(t, h.st())) {
		t.Fatal("the restored replica's snapshot differs")
	}

	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m4", "")), journal.TApplyCode_OK)
	if _, ok := h.st().MemberAddress("m4"); ok {
		t.Fatal("m4 not forgotten")
	}
	before = h.st()
	wantCode(t, h.apply(CmdSetMemberAddress, memberCmd("m4", "")), journal.TApplyCode_OK)
	h.unchanged(before)
}
