package admin

import (
	"context"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func TestInspectDataset(t *testing.T) {
	h := newHarness(t)
	before := h.prop.Index()
	v, err := h.srv.InspectDataset(context.Background(), "lake", "db", "items")
	if err != nil {
		t.Fatal(err)
	}
	if v.DatasetVersion != 7 || len(v.Fields) != 3 || v.Fields[1].GetListDimension() != 8 || len(v.Indexes) != 1 || v.Indexes[0].Name != "id_idx" {
		t.Fatalf("view %+v", v)
	}
	if h.prop.Index() != before {
		t.Fatal("inspect journaled an entry")
	}
	if _, err := h.srv.InspectDataset(context.Background(), "nope", "db", "items"); errCode(t, err) != adminapi.TErrorCode_NOT_FOUND {
		t.Fatal(err)
	}
	if _, err := h.srv.InspectDataset(context.Background(), "lake", "../x", "items"); errCode(t, err) != adminapi.TErrorCode_INVALID {
		t.Fatal(err)
	}
	_, err = h.srv.InspectDataset(context.Background(), "lake", "db", "missing")
	if errCode(t, err) != adminapi.TErrorCode_INSPECT_FAILED || strings.Contains(err.Error(), "/data/lake") {
		t.Fatalf("missing dataset: %v", err)
	}
}
