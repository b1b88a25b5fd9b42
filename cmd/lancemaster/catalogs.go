package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

func newCatalogsCmd(g *globals) *cobra.Command {
	return groupCmd("catalogs", "Register and manage catalogs (dataset roots)",
		newCatalogsCreateCmd(g),
		newCatalogsListCmd(g),
		newCatalogsShowCmd(g),
		newCatalogsUpdateCmd(g),
		newCatalogsRemoveCmd(g),
	)
}

// catalogFlags are the settable fields of a catalog, shared by create and
// update.
type catalogFlags struct {
	root, credentials, refresh, refreshKind, refreshURL  string
	refreshAddress, refreshStatement, refreshCredentials string
	optimizeRows, optimizeInterval                       int64
}

func (f *catalogFlags) register(c *cobra.Command, rootHelp string) {
	fs := c.Flags()
	fs.StringVar(&f.root, "root", "", rootHelp)
	fs.StringVar(&f.credentials, "credentials", "", "credentials reference: the name of a secret file on each master, never the secret")
	fs.StringVar(&f.refreshKind, "refresh-kind", "", "refresh target kind after an index change: none|webhook|mysql")
	fs.StringVar(&f.refresh, "refresh", "", "the same as --refresh-kind")
	fs.StringVar(&f.refreshURL, "refresh-url", "", "webhook URL (with --refresh-kind webhook)")
	fs.StringVar(&f.refreshAddress, "refresh-address", "", "HOST:PORT of a MySQL-protocol endpoint, e.g. a Doris FE's query port (with --refresh-kind mysql)")
	fs.StringVar(&f.refreshStatement, "refresh-statement", "",
		"statement template with placeholders {catalog} {db} {table} (with --refresh-kind mysql; default: "+raftfsm.DefaultRefreshStatement+")")
	fs.StringVar(&f.refreshCredentials, "refresh-credentials", "",
		"name of a credentials file (keys user, password) in each master's secrets directory (with --refresh-kind mysql)")
	fs.Int64Var(&f.optimizeRows, "optimize-unindexed-rows", 0, "OPTIMIZE policy: optimize a dataset when an index has more unindexed rows than this (0: off)")
	fs.Int64Var(&f.optimizeInterval, "optimize-min-interval-second", 0,
		fmt.Sprintf("OPTIMIZE policy: at most one OPTIMIZE per dataset in this many seconds (0: %d)", raftfsm.DefaultOptimizeMinIntervalSecond))
}

// kind returns the refresh kind given by --refresh-kind or --refresh (nil:
// neither); both with different values is a usage error.
func (f *catalogFlags) kind(c *cobra.Command) (*string, error) {
	a := changed(c, "refresh-kind", strings.ToLower(f.refreshKind))
	b := changed(c, "refresh", strings.ToLower(f.refresh))
	if a != nil && b != nil && *a != *b {
		return nil, usagef("--refresh-kind and --refresh disagree; give one of them")
	}
	if a != nil {
		return a, nil
	}
	return b, nil
}

// fields returns the request fields the flags set (nil: not given).
func (f *catalogFlags) fields(c *cobra.Command) (catalogRequestFields, error) {
	kind, err := f.kind(c)
	if err != nil {
		return catalogRequestFields{}, err
	}
	r := catalogRequestFields{
		root:         changed(c, "root", f.root),
		credentials:  changed(c, "credentials", f.credentials),
		kind:         kind,
		url:          changed(c, "refresh-url", f.refreshURL),
		address:      changed(c, "refresh-address", f.refreshAddress),
		statement:    changed(c, "refresh-statement", f.refreshStatement),
		refreshCreds: changed(c, "refresh-credentials", f.refreshCredentials),
	}
	if err := checkCatalogFlags(r); err != nil {
		return r, err
	}
	if c.Flags().Changed("optimize-unindexed-rows") {
		if f.optimizeRows < 0 {
			return r, usagef("--optimize-unindexed-rows must be ≥ 0 (0 switches the policy off)")
		}
		r.optimizeRows = &f.optimizeRows
	}
	if c.Flags().Changed("optimize-min-interval-second") {
		if f.optimizeInterval < 0 {
			return r, usagef("--optimize-min-interval-second must be ≥ 0")
		}
		r.optimizeInterval = &f.optimizeInterval
	}
	return r, nil
}

// catalogRequestFields are the optional fields of a create or update.
type catalogRequestFields struct {
	root, credentials, kind, url, address, statement, refreshCreds *string
	optimizeRows, optimizeInterval                                 *int64
}

func (r catalogRequestFields) empty() bool {
	return r == catalogRequestFields{}
}

// changed returns the flag's value if it was given on the command line, so
// that an explicit empty value (clearing a field) is still sent.
func changed(c *cobra.Command, name, value string) *string {
	if !c.Flags().Changed(name) {
		return nil
	}
	return &value
}

func newCatalogsCreateCmd(g *globals) *cobra.Command {
	var f catalogFlags
	c := &cobra.Command{
		Use:         "create NAME --root URI",
		Annotations: writeCommand(),
		Short:       "Register a catalog: table DB.TBL is the dataset <root>/<db>/<tbl>.lance",
		Example: "  lancemaster catalogs create lake --root s3://bucket/warehouse --credentials lake-s3\n" +
			"  lancemaster catalogs create local --root /data/lance --refresh-kind webhook --refresh-url http://10.0.0.5:8080/refresh\n" +
			"  lancemaster catalogs create doris --root s3://bucket/warehouse --refresh-kind mysql \\\n" +
			"      --refresh-address fe1:9030 --refresh-credentials doris-refresh --optimize-unindexed-rows 100000",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			if strings.TrimSpace(f.root) == "" {
				return usagef("--root must not be empty")
			}
			r, err := f.fields(cmd)
			if err != nil {
				return err
			}
			cat := &adminapi.TCatalog{
				Name: name, RootURI: &f.root, CredentialsRef: r.credentials, RefreshKind: r.kind, RefreshURL: r.url,
				RefreshAddress: r.address, RefreshStatement: r.statement, RefreshCredentialsRef: r.refreshCreds,
				OptimizeUnindexedRows: r.optimizeRows, OptimizeMinIntervalSecond: r.optimizeInterval,
			}
			var resp *adminapi.TCatalog
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.CreateCatalog(ctx, cat, g.claim())
				return err
			}); err != nil {
				return err
			}
			return g.printCatalogResult(cmd, resp, "created")
		},
	}
	f.register(c, "dataset root URI: an absolute path, file://, s3://... (required)")
	_ = c.MarkFlagRequired("root")
	return c
}

func newCatalogsUpdateCmd(g *globals) *cobra.Command {
	var f catalogFlags
	c := &cobra.Command{
		Use:         "update NAME [--root URI] [--credentials REF] [--refresh-kind none|webhook|mysql] [--refresh-url URL] [--refresh-address HOST:PORT] [--refresh-statement TEMPLATE] [--refresh-credentials REF] [--optimize-unindexed-rows N] [--optimize-min-interval-second S]",
		Annotations: writeCommand(),
		Short:       "Change a catalog; only the flags given are changed",
		Long: "Change a catalog; only the flags given are sent. Rotating --credentials is always allowed;\n" +
			"changing --root is refused (CATALOG_IN_USE) while any unresolved job targets the catalog.\n" +
			"Switching --refresh-kind clears the other kinds' fields that are not given.",
		Example: "  lancemaster catalogs update lake --credentials lake-s3-2025\n" +
			"  lancemaster catalogs update doris --refresh-statement 'REFRESH TABLE {catalog}.{db}.{table}'",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			r, err := f.fields(cmd)
			if err != nil {
				return err
			}
			if r.empty() {
				return usagef("nothing to update: give at least one of --root, --credentials, --refresh-kind, --refresh-url, " +
					"--refresh-address, --refresh-statement, --refresh-credentials, --optimize-unindexed-rows, --optimize-min-interval-second")
			}
			req := &adminapi.TUpdateCatalogRequest{
				Name: name, RootURI: r.root, CredentialsRef: r.credentials, RefreshKind: r.kind, RefreshURL: r.url,
				RefreshAddress: r.address, RefreshStatement: r.statement, RefreshCredentialsRef: r.refreshCreds,
				OptimizeUnindexedRows: r.optimizeRows, OptimizeMinIntervalSecond: r.optimizeInterval, Actor: g.actor(),
			}
			var resp *adminapi.TCatalog
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.UpdateCatalog(ctx, req)
				return err
			}); err != nil {
				return err
			}
			return g.printCatalogResult(cmd, resp, "updated")
		},
	}
	f.register(c, "new dataset root URI (refused while unresolved jobs target the catalog)")
	return c
}

func (g *globals) printCatalogResult(cmd *cobra.Command, cat *adminapi.TCatalog, verb string) error {
	if g.jsonOutput() {
		return printJSON(cmd.OutOrStdout(), cat)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "catalog %s %s (id %s)\n", sanitize(cat.GetName()), verb, i64(cat.CatalogID))
	return err
}

func newCatalogsListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List catalogs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cats, err := g.listCatalogs(cmd)
			if err != nil {
				return err
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), cats)
			}
			rows := make([][]string, 0, len(cats))
			for _, c := range cats {
				rows = append(rows, []string{
					i64(c.CatalogID), c.Name, str(c.Provider), str(c.RootURI), str(c.CredentialsRef),
					str(c.RefreshKind), refreshTarget(c), optimizePolicy(c), i32(c.UnresolvedJobs), when(cmd.OutOrStdout(), c.UpdateTimeMs),
				})
			}
			return printTable(cmd.OutOrStdout(),
				[]string{"ID", "NAME", "PROVIDER", "ROOT", "CREDENTIALS", "REFRESH", "REFRESH TARGET", "OPTIMIZE", "UNRESOLVED", "UPDATED"}, rows)
		},
	}
}

func (g *globals) listCatalogs(cmd *cobra.Command) ([]*adminapi.TCatalog, error) {
	var cats []*adminapi.TCatalog
	if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
		cats, err = c.ListCatalogs(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	if cats == nil {
		cats = []*adminapi.TCatalog{}
	}
	return cats, nil
}

// refreshTarget is where a refresh goes: the webhook URL, or the mysql
// address with its credentials reference (a file name, never the secret).
func refreshTarget(c *adminapi.TCatalog) string {
	switch c.GetRefreshKind() {
	case raftfsm.RefreshWebhook:
		return str(c.RefreshURL)
	case raftfsm.RefreshMySQL:
		return c.GetRefreshAddress() + " (credentials " + c.GetRefreshCredentialsRef() + ")"
	}
	return dash
}

// optimizePolicy is the OPTIMIZE policy in a few words.
func optimizePolicy(c *adminapi.TCatalog) string {
	if c.GetOptimizeUnindexedRows() <= 0 {
		return "off"
	}
	return fmt.Sprintf("> %d unindexed rows, every %ds at most", c.GetOptimizeUnindexedRows(), c.GetOptimizeMinIntervalSecond())
}

func newCatalogsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show one catalog, its refresh target and OPTIMIZE policy",
		Example: "  lancemaster catalogs show doris",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			cats, err := g.listCatalogs(cmd)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cats, func(c *adminapi.TCatalog) bool { return strings.EqualFold(c.Name, name) })
			if i < 0 {
				return &adminapi.TAdminError{Code: adminapi.TErrorCode_NOT_FOUND, Message: fmt.Sprintf("catalog %q does not exist", name)}
			}
			c := cats[i]
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), c)
			}
			kvs := [][2]string{
				{"id", i64(c.CatalogID)}, {"name", c.Name}, {"provider", str(c.Provider)}, {"root", str(c.RootURI)},
				{"credentials", str(c.CredentialsRef)}, {"refresh kind", str(c.RefreshKind)},
			}
			switch c.GetRefreshKind() {
			case raftfsm.RefreshWebhook:
				kvs = append(kvs, [2]string{"refresh url", str(c.RefreshURL)})
			case raftfsm.RefreshMySQL:
				stmt := c.GetRefreshStatement()
				if stmt == "" {
					stmt = raftfsm.DefaultRefreshStatement + " (default)"
				}
				kvs = append(kvs, [2]string{"refresh address", str(c.RefreshAddress)},
					[2]string{"refresh statement", stmt}, [2]string{"refresh credentials", str(c.RefreshCredentialsRef)})
			}
			kvs = append(kvs, [2]string{"optimize policy", optimizePolicy(c)},
				[2]string{"unresolved jobs", i32(c.UnresolvedJobs)},
				[2]string{"created", whenAgo(cmd.OutOrStdout(), c.CreateTimeMs)}, [2]string{"updated", whenAgo(cmd.OutOrStdout(), c.UpdateTimeMs)})
			return printKeyValues(cmd.OutOrStdout(), kvs)
		},
	}
}

func newCatalogsRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "remove NAME",
		Annotations: writeCommand(),
		Short:       "Remove a catalog (refused while unresolved jobs target it)",
		Example:     "  lancemaster catalogs remove lake",
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) error {
				return c.RemoveCatalog(ctx, name, g.claim())
			}); err != nil {
				return err
			}
			return g.printRemoved(cmd, "catalog", name)
		},
	}
}

// printRemoved confirms a removal that the API answers with nothing.
func (g *globals) printRemoved(cmd *cobra.Command, kind, name string) error {
	if g.jsonOutput() {
		return printJSON(cmd.OutOrStdout(), map[string]any{kind: name, "removed": true})
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s removed\n", kind, sanitize(name))
	return err
}
