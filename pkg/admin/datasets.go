package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/job/jobwire"
)

// InspectDataset shows a dataset's version, schema and indexes as a backend
// inspects it now (the same path admission takes, DESIGN.md §5 step 3).
// Nothing is journaled; the locator and the credentials are not shown.
func (s *Server) InspectDataset(ctx context.Context, catalog, db, table string) (*adminapi.TDatasetView, error) {
	if err := job.ValidatePathName("catalog", catalog); err != nil {
		return nil, toAdminError(err)
	}
	if err := job.ValidatePathName("db", db); err != nil {
		return nil, toAdminError(err)
	}
	if err := job.ValidatePathName("table", table); err != nil {
		return nil, toAdminError(err)
	}
	st := s.d.Reader.State()
	cat, ok := st.Catalog(catalog)
	if !ok {
		return nil, adminError(adminapi.TErrorCode_NOT_FOUND, "catalog %q does not exist", catalog)
	}
	loc, err := job.DatasetLocator(cat.RootURI, db, table)
	if err != nil {
		return nil, toAdminError(err)
	}
	snap, err := s.inspect(ctx, st, cat, loc)
	if err != nil {
		return nil, toAdminError(err)
	}
	w := jobwire.InspectResponse(snap)
	return &adminapi.TDatasetView{DatasetVersion: snap.Version, Fields: w.Fields, Indexes: w.Indexes}, nil
}
