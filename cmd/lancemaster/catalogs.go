package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func newCatalogsCmd(g *globals) *cobra.Command {
	return groupCmd("catalogs", "Register and manage catalogs (dataset roots)",
		newCatalogsCreateCmd(g),
		newCatalogsListCmd(g),
		newCatalogsUpdateCmd(g),
		newCatalogsRemoveCmd(g),
	)
}

// catalogFlags are the settable fields of a catalog, shared by create and
// update.
type catalogFlags struct {
	root, credentials, refresh, refreshURL string
}

func (f *catalogFlags) register(c *cobra.Command, rootHelp string) {
	fs := c.Flags()
	fs.StringVar(&f.root, "root", "", rootHelp)
	fs.StringVar(&f.credentials, "credentials", "", "credentials reference: the name of a secret file on each master, never the secret")
	fs.StringVar(&f.refresh, "refresh", "", "refresh target kind after an index change: none|webhook")
	fs.StringVar(&f.refreshURL, "refresh-url", "", "webhook URL (with --refresh webhook)")
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
			"  lancemaster catalogs create local --root /data/lance --refresh webhook --refresh-url http://10.0.0.5:8080/refresh",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			if strings.TrimSpace(f.root) == "" {
				return usagef("--root must not be empty")
			}
			cat := &adminapi.TCatalog{
				Name:           name,
				RootURI:        &f.root,
				CredentialsRef: changed(cmd, "credentials", f.credentials),
				RefreshKind:    changed(cmd, "refresh", strings.ToLower(f.refresh)),
				RefreshURL:     changed(cmd, "refresh-url", f.refreshURL),
			}
			var resp *adminapi.TCatalog
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				resp, err = c.CreateCatalog(ctx, cat)
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
		Use:         "update NAME [--root URI] [--credentials REF] [--refresh none|webhook] [--refresh-url URL]",
		Annotations: writeCommand(),
		Short:       "Change a catalog; only the flags given are changed",
		Long: "Change a catalog; only the flags given are sent. Rotating --credentials is always allowed;\n" +
			"changing --root is refused (CATALOG_IN_USE) while any unresolved job targets the catalog.",
		Example: "  lancemaster catalogs update lake --credentials lake-s3-2025",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := parseName("NAME", args[0])
			if err != nil {
				return err
			}
			req := &adminapi.TUpdateCatalogRequest{
				Name:           name,
				RootURI:        changed(cmd, "root", f.root),
				CredentialsRef: changed(cmd, "credentials", f.credentials),
				RefreshKind:    changed(cmd, "refresh", strings.ToLower(f.refresh)),
				RefreshURL:     changed(cmd, "refresh-url", f.refreshURL),
			}
			if req.RootURI == nil && req.CredentialsRef == nil && req.RefreshKind == nil && req.RefreshURL == nil {
				return usagef("nothing to update: give at least one of --root, --credentials, --refresh, --refresh-url")
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
			var cats []*adminapi.TCatalog
			if err := g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
				cats, err = c.ListCatalogs(ctx)
				return err
			}); err != nil {
				return err
			}
			if cats == nil {
				cats = []*adminapi.TCatalog{}
			}
			if g.jsonOutput() {
				return printJSON(cmd.OutOrStdout(), cats)
			}
			rows := make([][]string, 0, len(cats))
			for _, c := range cats {
				rows = append(rows, []string{
					i64(c.CatalogID), c.Name, str(c.Provider), str(c.RootURI), str(c.CredentialsRef),
					str(c.RefreshKind), str(c.RefreshURL), i32(c.UnresolvedJobs), timeMs(c.UpdateTimeMs),
				})
			}
			return printTable(cmd.OutOrStdout(),
				[]string{"ID", "NAME", "PROVIDER", "ROOT", "CREDENTIALS", "REFRESH", "REFRESH URL", "UNRESOLVED", "UPDATED"}, rows)
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
				return c.RemoveCatalog(ctx, name)
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
