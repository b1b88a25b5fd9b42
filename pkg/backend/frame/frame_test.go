package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestRoundTripAndBounds(t *testing.T) {
	var buf bytes.Buffer
	in := Request{Protocol: Protocol, Mode: ModeBuild, DatasetURI: "/d/t.lance", StorageOptions: map[string]string{"k": "v"}, JobID: 7}
	if err := Write(&buf, in, MaxRequestBytes); err != nil {
		t.Fatal(err)
	}
	var out Request
	if err := Read(&buf, &out, MaxRequestBytes); err != nil || out.JobID != 7 || out.StorageOptions["k"] != "v" {
		t.Fatalf("%+v %v", out, err)
	}
	if err := Write(&buf, Request{DatasetURI: string(make([]byte, 100))}, 50); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
	huge := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if err := Read(bytes.NewReader(huge), &out, MaxResultBytes); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge prefix: %v", err)
	}
	short := append(binary.BigEndian.AppendUint32(nil, 10), '{')
	if err := Read(bytes.NewReader(short), &out, MaxResultBytes); err == nil {
		t.Fatal("short body accepted")
	}
	garbage := append(binary.BigEndian.AppendUint32(nil, 3), 'x', 'y', 'z')
	if err := Read(bytes.NewReader(garbage), &out, MaxResultBytes); err == nil {
		t.Fatal("garbage accepted")
	}
}
