package raftfsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/journal"
)

func TestCheckCommand(t *testing.T) {
	good, err := Encode(CmdAddBackend, &journal.TBackendCommand{NowMs: 1, Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCommand(good); err != nil {
		t.Fatalf("a valid command: %v", err)
	}
	if len(decoders) != len(registry) {
		t.Fatalf("%d decoders for %d registered commands", len(decoders), len(registry))
	}
	bad := map[string][]byte{
		"empty":            nil,
		"unknown type":     {0x7f, 0x00},
		"ignorable type":   {0xff, 0x00},
		"truncated body":   good[:len(good)-3],
		"garbage body":     append([]byte{byte(CmdAdmit)}, 0xde, 0xad, 0xbe, 0xef),
		"missing required": {byte(CmdAddBackend), 0x00},
	}
	for name, cmd := range bad {
		if err := CheckCommand(cmd); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := CheckCommand([]byte{0x7f}); !errors.Is(err, ErrUnknownCommand) {
		t.Errorf("unknown type error %v", err)
	}
}

func TestRestoreKeepsTheAppliedIndex(t *testing.T) {
	h := walked(t, 1, 50)
	var b bytes.Buffer
	if err := h.st().WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	if got, want := restored(t, b.Bytes()).State().AppliedIndex(), h.st().AppliedIndex(); got != want || want == 0 {
		t.Fatalf("applied index after restore %d; want %d", got, want)
	}
}
