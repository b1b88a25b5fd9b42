package raftfsm

import (
	"strconv"
	"strings"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// Catalog commands. A catalog's id is allocated here and never reused, so a
// retained job of a removed catalog can never be mistaken for one of a new
// catalog with the same name. While any unresolved job targets a catalog it
// may not be removed or re-rooted (DESIGN.md §5); rotating the credentials
// reference or changing the refresh target is always allowed.

func init() {
	register(CommandSpec{Type: CmdCreateCatalog, Name: "create_catalog", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTCatalogCommand, applyCreateCatalog)
	register(CommandSpec{Type: CmdUpdateCatalog, Name: "update_catalog", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTCatalogCommand, applyUpdateCatalog)
	register(CommandSpec{Type: CmdRemoveCatalog, Name: "remove_catalog", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTRemoveCatalogCommand, applyRemoveCatalog)
}

// catalogByName finds a catalog by name, case-insensitively (nil: none).
func (t *tx) catalogByName(name string) *Catalog {
	c, _ := byFold(t.catalogNames.Version(), name)
	return c
}

func applyCreateCatalog(t *tx, c *journal.TCatalogCommand) (*journal.TApplyResponse, error) {
	if c.Catalog == nil {
		return respFail(journal.TApplyCode_INVALID, "create-catalog command carries no catalog"), nil
	}
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	cat := CatalogFromThrift(c.Catalog)
	if err := job.ValidatePathName("catalog name", cat.Name); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if err := normalizeCatalog(cat); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if old := t.catalogByName(cat.Name); old != nil {
		return respFail(journal.TApplyCode_ALREADY_EXISTS, "catalog %q already exists (as %q)", cat.Name, old.Name), nil
	}
	t.m.lastCatalogID++
	cat.ID = t.m.lastCatalogID
	cat.CreateTimeMs, cat.UpdateTimeMs = t.now, t.now
	t.putCatalog(cat)
	t.m.catalogs++
	t.audit(c.Audit, AuditCatalogCreate, cat.Name, catalogChanges(nil, cat))
	return respID(cat.ID), nil
}

// applyUpdateCatalog changes the fields the command sets, by catalog name.
func applyUpdateCatalog(t *tx, c *journal.TCatalogCommand) (*journal.TApplyResponse, error) {
	if c.Catalog == nil {
		return respFail(journal.TApplyCode_INVALID, "update-catalog command carries no catalog"), nil
	}
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	old := t.catalogByName(c.Catalog.Name)
	if old == nil {
		return respFail(journal.TApplyCode_NOT_FOUND, "catalog %q does not exist", c.Catalog.Name), nil
	}
	n := *old
	in := c.Catalog
	if in.IsSetProvider() {
		n.Provider = in.GetProvider()
	}
	if in.IsSetRootURI() {
		n.RootURI = in.GetRootURI()
	}
	if in.IsSetCredentialsRef() {
		n.CredentialsRef = in.GetCredentialsRef()
	}
	if in.IsSetRefreshKind() {
		n.RefreshKind = in.GetRefreshKind()
	}
	if in.IsSetRefreshURL() {
		n.RefreshURL = in.GetRefreshURL()
	}
	if in.IsSetRefreshAddress() {
		n.RefreshAddress = in.GetRefreshAddress()
	}
	if in.IsSetRefreshStatement() {
		n.RefreshStatement = in.GetRefreshStatement()
	}
	if in.IsSetRefreshCredentialsRef() {
		n.RefreshCredentialsRef = in.GetRefreshCredentialsRef()
	}
	if in.IsSetOptimizeUnindexedRows() {
		n.OptimizeUnindexedRows = in.GetOptimizeUnindexedRows()
	}
	if in.IsSetOptimizeMinIntervalSecond() {
		n.OptimizeMinIntervalSecond = in.GetOptimizeMinIntervalSecond()
	}
	if err := normalizeCatalog(&n); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", errMessage(err)), nil
	}
	if n == *old {
		// Idempotent: a retried or empty update succeeds and changes nothing.
		return respID(old.ID), nil
	}
	if inUse := t.books().catalogCount(old.ID); inUse > 0 && (n.RootURI != old.RootURI || n.Provider != old.Provider) {
		return respFail(journal.TApplyCode_CATALOG_IN_USE,
			"catalog %q has %d unresolved jobs; its root cannot change until they resolve", old.Name, inUse), nil
	}
	n.UpdateTimeMs = t.now
	t.putCatalog(&n)
	t.audit(c.Audit, AuditCatalogUpdate, n.Name, catalogChanges(old, &n))
	return respID(n.ID), nil
}

func applyRemoveCatalog(t *tx, c *journal.TRemoveCatalogCommand) (*journal.TApplyResponse, error) {
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	old := t.catalogByName(c.Name)
	if old == nil {
		return respFail(journal.TApplyCode_NOT_FOUND, "catalog %q does not exist", c.Name), nil
	}
	if n := t.books().catalogCount(old.ID); n > 0 {
		return respFail(journal.TApplyCode_CATALOG_IN_USE,
			"catalog %q has %d unresolved jobs; it cannot be removed until they resolve", old.Name, n), nil
	}
	t.deleteCatalog(old)
	t.m.catalogs--
	t.audit(c.Audit, AuditCatalogRemove, old.Name, "removed (id "+strconv.FormatInt(old.ID, 10)+", root_uri "+old.RootURI+")")
	return respID(old.ID), nil
}

// normalizeCatalog checks a catalog's fields and puts them in stored form:
// provider DIRECTORY, root normalized, refresh kind none|webhook|mysql with
// the fields of that kind (catalog_refresh.go), the OPTIMIZE policy checked.
func normalizeCatalog(c *Catalog) error {
	if c.Provider == "" {
		c.Provider = job.ProviderDirectory
	}
	if c.Provider != job.ProviderDirectory {
		return job.Errorf(job.CodeInvalid, "provider %q is not supported (want %s)", c.Provider, job.ProviderDirectory)
	}
	root, err := job.NormalizeLocator(c.RootURI)
	if err != nil {
		return job.Errorf(job.CodeInvalid, "catalog root: %s", errMessage(err))
	}
	c.RootURI = root
	if c.CredentialsRef != "" {
		if err := job.ValidatePathName("credentials reference", c.CredentialsRef); err != nil {
			return err
		}
	}
	c.RefreshKind = strings.ToLower(c.RefreshKind)
	if c.RefreshKind == "" {
		c.RefreshKind = RefreshNone
	}
	switch c.RefreshKind {
	case RefreshNone, RefreshWebhook, RefreshMySQL:
	default:
		return job.Errorf(job.CodeInvalid, "refresh kind %q is not %q, %q or %q", c.RefreshKind, RefreshNone, RefreshWebhook, RefreshMySQL)
	}
	if err := normalizeCatalogRefresh(c); err != nil {
		return err
	}
	return normalizeOptimizePolicy(c)
}
