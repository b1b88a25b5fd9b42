package admin

import (
	"context"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
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
	snap, raw, err := s.inspect(ctx, st, cat, loc)
	if err != nil {
		return nil, toAdminError(err)
	}
	w := jobwire.InspectResponse(snap)
	// The snapshot keeps each index's definition; its uuid and statistics
	// (DESIGN.md §13.7) are the backend's, shown as it sent them.
	stats := make(map[string]*wire.TLanceIndexInfo, len(raw.GetIndexes()))
	for _, ix := range raw.GetIndexes() {
		if ix != nil {
			stats[ix.Name] = ix
		}
	}
	for _, ix := range w.Indexes {
		if b := stats[ix.Name]; b != nil {
			ix.IndexUUID, ix.CreatedAtMs, ix.IndexedRows = b.IndexUUID, b.CreatedAtMs, b.IndexedRows
			ix.UnindexedRows, ix.Segments, ix.SizeBytes = b.UnindexedRows, b.Segments, b.SizeBytes
		}
	}
	return &adminapi.TDatasetView{DatasetVersion: snap.Version, Fields: w.Fields, Indexes: w.Indexes}, nil
}
