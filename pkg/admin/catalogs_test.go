package admin

import (
	"context"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// Catalog input the FSM would refuse is refused before it is journaled,
// whichever field combination makes it so (CI's fuzzer found a refresh URL
// without the webhook kind journaled and then refused by the FSM).
func TestCatalogInvalidInputJournalsNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cases := []struct {
		name string
		fn   func() error
	}{
		{"create: refresh URL without the webhook kind", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c1", RootURI: strp("/data/c1"),
				RefreshURL: strp("http://127.0.0.1:9/refresh")})
			return err
		}},
		{"create: refresh URL with kind none", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c2", RootURI: strp("/data/c2"),
				RefreshKind: strp("none"), RefreshURL: strp("http://127.0.0.1:9/refresh")})
			return err
		}},
		{"create: webhook without a URL", func() error {
			_, err := h.srv.CreateCatalog(ctx, &adminapi.TCatalog{Name: "c3", RootURI: strp("/data/c3"),
				RefreshKind: strp("webhook")})
			return err
		}},
		{"update: a URL on a catalog whose kind is none", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshURL: strp("http://127.0.0.1:9/refresh")})
			return err
		}},
		{"update: webhook on a catalog without a URL", func() error {
			_, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
				RefreshKind: strp("webhook")})
			return err
		}},
	}
	for _, c := range cases {
		before := h.prop.Entries()
		err := c.fn()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if code := errCode(t, err); code != adminapi.TErrorCode_INVALID {
			t.Errorf("%s: code %s, want INVALID (%v)", c.name, code, err)
		}
		if n := h.prop.Entries() - before; n != 0 {
			t.Errorf("%s: refused as INVALID but journaled %d entries", c.name, n)
		}
	}
}

// Switching refresh kinds on an existing catalog: webhook with a stored URL
// needs no URL again; none drops the stored URL.
func TestCatalogRefreshKindUpdates(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	hook := "http://127.0.0.1:9/refresh"
	c, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
		RefreshKind: strp("webhook"), RefreshURL: strp(hook)})
	if err != nil || c.GetRefreshKind() != RefreshWebhook || c.GetRefreshURL() != hook {
		t.Fatalf("set webhook: %v %v", c, err)
	}
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RefreshKind: strp("none")}); err != nil ||
		c.GetRefreshKind() != RefreshNone || c.GetRefreshURL() != "" {
		t.Fatalf("back to none: %v %v", c, err)
	}
	if _, err := h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", RefreshURL: strp(hook)}); err == nil {
		t.Fatal("a URL alone on a none catalog was accepted")
	}
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake",
		RefreshKind: strp("webhook"), RefreshURL: strp(hook)}); err != nil {
		t.Fatalf("webhook again: %v", err)
	}
	// The URL is stored: changing only the credentials keeps the webhook.
	if c, err = h.srv.UpdateCatalog(ctx, &adminapi.TUpdateCatalogRequest{Name: "lake", CredentialsRef: strp("lake-creds")}); err != nil ||
		c.GetRefreshURL() != hook {
		t.Fatalf("credentials update: %v %v", c, err)
	}
}
