package admin

import (
	"context"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Refresh kinds a catalog may name (the refresh driver's refreshers).
const (
	RefreshNone    = raftfsm.RefreshNone
	RefreshWebhook = raftfsm.RefreshWebhook
	RefreshMySQL   = raftfsm.RefreshMySQL
)

// CreateCatalog registers a catalog.
func (s *Server) CreateCatalog(ctx context.Context, c *adminapi.TCatalog, claimed string) (*adminapi.TCatalog, error) {
	if c == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing catalog")
	}
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return nil, err
	}
	rec := &journal.TCatalogRecord{Name: c.Name}
	if err := job.ValidatePathName("catalog", c.Name); err != nil {
		return nil, toAdminError(err)
	}
	provider := strings.ToUpper(c.GetProvider())
	if provider == "" {
		provider = job.ProviderDirectory
	}
	if provider != job.ProviderDirectory {
		return nil, adminError(adminapi.TErrorCode_INVALID, "provider %q is not supported (want DIRECTORY)", c.GetProvider())
	}
	rec.Provider = &provider
	if !c.IsSetRootURI() {
		return nil, adminError(adminapi.TErrorCode_INVALID, "a catalog needs a root URI (--root)")
	}
	if err := applyCatalogFields(rec, catalogFields{root: c.RootURI, creds: c.CredentialsRef, kind: c.RefreshKind,
		hook: c.RefreshURL, address: c.RefreshAddress, statement: c.RefreshStatement, refreshCreds: c.RefreshCredentialsRef,
		optimizeRows: c.OptimizeUnindexedRows, optimizeInterval: c.OptimizeMinIntervalSecond}); err != nil {
		return nil, toAdminError(err)
	}
	if rec.RefreshKind == nil {
		k := RefreshNone
		rec.RefreshKind = &k
	}
	// The kind and URL must agree (normalizeCatalog in the FSM); propose's
	// preview refuses a mismatch before it is journaled.
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	if err := s.checkCatalogStore(ctx, rec, false); err != nil { // storeprobe.go
		return nil, err
	}
	resp, err := s.propose(ctx, raftfsm.CmdCreateCatalog, &journal.TCatalogCommand{NowMs: s.nowMs(), Catalog: rec, Audit: who})
	if err != nil {
		return nil, err
	}
	s.d.Logger.Info("catalog created", zap.Int64("catalog_id", resp.GetID()), zap.String("catalog", c.Name))
	return s.catalogView(c.Name)
}

// UpdateCatalog changes the fields that are set. Changing the root while an
// unresolved job targets the catalog is CATALOG_IN_USE; rotating credentials
// is always allowed.
func (s *Server) UpdateCatalog(ctx context.Context, r *adminapi.TUpdateCatalogRequest) (*adminapi.TCatalog, error) {
	if r == nil {
		return nil, adminError(adminapi.TErrorCode_INVALID, "missing request")
	}
	if err := job.CheckBytes("catalog", r.Name, job.MaxNameBytes); err != nil {
		return nil, toAdminError(err)
	}
	who, err := claimOf(ctx, r.GetActor())
	if err != nil {
		return nil, err
	}
	rec := &journal.TCatalogRecord{Name: r.Name}
	if err := applyCatalogFields(rec, catalogFields{root: r.RootURI, creds: r.CredentialsRef, kind: r.RefreshKind,
		hook: r.RefreshURL, address: r.RefreshAddress, statement: r.RefreshStatement, refreshCreds: r.RefreshCredentialsRef,
		optimizeRows: r.OptimizeUnindexedRows, optimizeInterval: r.OptimizeMinIntervalSecond}); err != nil {
		return nil, toAdminError(err)
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	if err := s.checkCatalogStore(ctx, rec, true); err != nil { // storeprobe.go
		return nil, err
	}
	if _, err := s.propose(ctx, raftfsm.CmdUpdateCatalog, &journal.TCatalogCommand{NowMs: s.nowMs(), Catalog: rec, Audit: who}); err != nil {
		return nil, err
	}
	s.d.Logger.Info("catalog updated", zap.String("catalog", r.Name))
	return s.catalogView(r.Name)
}

// catalogFields are the optional fields of a create or update request
// (nil: not given).
type catalogFields struct {
	root, creds, kind, hook, address, statement, refreshCreds *string
	optimizeRows, optimizeInterval                            *int64
}

// applyCatalogFields validates and copies the optional fields that are set.
// Whether the fields fit the refresh kind is the FSM's check (its preview
// runs before anything is journaled); switching the kind clears the fields
// of the other kinds that the request does not set.
func applyCatalogFields(rec *journal.TCatalogRecord, f catalogFields) error {
	if f.root != nil {
		loc, err := job.NormalizeLocator(*f.root)
		if err != nil {
			return err
		}
		rec.RootURI = &loc
	}
	if f.creds != nil && *f.creds != "" {
		if err := job.ValidatePathName("credentials reference", *f.creds); err != nil {
			return err
		}
	}
	rec.CredentialsRef = f.creds
	if f.kind != nil {
		k := strings.ToLower(strings.TrimSpace(*f.kind))
		if k != RefreshNone && k != RefreshWebhook && k != RefreshMySQL {
			return job.Errorf(job.CodeInvalid, "refresh kind must be none, webhook or mysql")
		}
		rec.RefreshKind = &k
	}
	if f.hook != nil {
		if err := checkRefreshURL(*f.hook); err != nil {
			return err
		}
		rec.RefreshURL = f.hook
	}
	if err := applyMySQLRefreshFields(rec, f); err != nil {
		return err
	}
	if rec.RefreshKind != nil {
		k, empty := *rec.RefreshKind, ""
		if k != RefreshWebhook && rec.RefreshURL == nil {
			rec.RefreshURL = &empty
		}
		if k != RefreshMySQL {
			for _, p := range []**string{&rec.RefreshAddress, &rec.RefreshStatement, &rec.RefreshCredentialsRef} {
				if *p == nil {
					*p = &empty
				}
			}
		}
	}
	if f.optimizeRows != nil || f.optimizeInterval != nil {
		var rows, interval int64
		if f.optimizeRows != nil {
			rows = *f.optimizeRows
		}
		if f.optimizeInterval != nil {
			interval = *f.optimizeInterval
		}
		if err := raftfsm.ValidateOptimizePolicy(rows, interval); err != nil {
			return err
		}
		rec.OptimizeUnindexedRows, rec.OptimizeMinIntervalSecond = f.optimizeRows, f.optimizeInterval
	}
	return nil
}

func checkRefreshURL(hook string) error {
	if err := job.CheckBytes("refresh URL", hook, job.MaxURIBytes); err != nil {
		return err
	}
	if hook == "" {
		return nil
	}
	u, err := url.Parse(hook)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return job.Errorf(job.CodeInvalid, "refresh URL must be an http or https URL")
	}
	if u.User != nil {
		return job.Errorf(job.CodeInvalid, "refresh URL may not carry user information")
	}
	return nil
}

// applyMySQLRefreshFields checks the fields of refresh kind mysql that are
// set and not empty (an empty one clears the field).
func applyMySQLRefreshFields(rec *journal.TCatalogRecord, f catalogFields) error {
	if f.address != nil && *f.address != "" {
		if err := raftfsm.ValidateRefreshAddress(*f.address); err != nil {
			return err
		}
	}
	if f.statement != nil && *f.statement != "" {
		if err := raftfsm.ValidateRefreshStatement(*f.statement); err != nil {
			return err
		}
	}
	if f.refreshCreds != nil && *f.refreshCreds != "" {
		if err := raftfsm.ValidateRefreshCredentialsRef(*f.refreshCreds); err != nil {
			return err
		}
	}
	rec.RefreshAddress, rec.RefreshStatement, rec.RefreshCredentialsRef = f.address, f.statement, f.refreshCreds
	return nil
}

// ListCatalogs lists catalogs by id.
func (s *Server) ListCatalogs(ctx context.Context) ([]*adminapi.TCatalog, error) {
	st := s.d.Reader.State()
	out := []*adminapi.TCatalog{}
	for _, c := range st.Catalogs() {
		out = append(out, catalogToView(st, c))
	}
	return out, nil
}

// RemoveCatalog removes a catalog no unresolved job targets.
func (s *Server) RemoveCatalog(ctx context.Context, name, claimed string) error {
	if err := job.CheckBytes("catalog", name, job.MaxNameBytes); err != nil {
		return toAdminError(err)
	}
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return err
	}
	if err := s.current(ctx); err != nil {
		return err
	}
	if _, err := s.propose(ctx, raftfsm.CmdRemoveCatalog, &journal.TRemoveCatalogCommand{NowMs: s.nowMs(), Name: name, Audit: who}); err != nil {
		return err
	}
	s.d.Logger.Info("catalog removed", zap.String("catalog", name))
	return nil
}

func (s *Server) catalogView(name string) (*adminapi.TCatalog, error) {
	st := s.d.Reader.State()
	c, ok := st.Catalog(name)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "catalog %q does not exist", name)
	}
	return catalogToView(st, c), nil
}

func catalogToView(st *raftfsm.State, c *raftfsm.Catalog) *adminapi.TCatalog {
	id, n := c.ID, int32(st.UnresolvedInCatalog(c.ID))
	provider, root, creds, kind, hook := c.Provider, c.RootURI, c.CredentialsRef, c.RefreshKind, c.RefreshURL
	ct, ut := c.CreateTimeMs, c.UpdateTimeMs
	addr, stmt, rcreds := c.RefreshAddress, c.RefreshStatement, c.RefreshCredentialsRef
	rows, interval := c.OptimizeUnindexedRows, c.OptimizeMinIntervalSecond
	return &adminapi.TCatalog{CatalogID: &id, Name: c.Name, Provider: &provider, RootURI: &root,
		CredentialsRef: &creds, RefreshKind: &kind, RefreshURL: &hook, CreateTimeMs: &ct, UpdateTimeMs: &ut, UnresolvedJobs: &n,
		RefreshAddress: &addr, RefreshStatement: &stmt, RefreshCredentialsRef: &rcreds,
		OptimizeUnindexedRows: &rows, OptimizeMinIntervalSecond: &interval}
}
