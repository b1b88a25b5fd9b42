package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Dynamic shell completion (`lancemaster completion bash|zsh|fish`): job
// ids, catalog names and backends come from the master the command line
// names (--address, the TLS flags), option keys from this binary. A master
// that cannot be asked completes nothing; completion never prints an error.

type completer func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

const noFiles = cobra.ShellCompDirectiveNoFileComp

// fromMaster completes the first argument with what list returns.
func fromMaster(g *globals, list func(ctx context.Context, c *adminapi.LanceMasterServiceClient) ([]string, error)) completer {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		var out []string
		_ = g.call(cmd, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) (err error) {
			out, err = list(ctx, c)
			return err
		})
		return withPrefix(out, toComplete), noFiles
	}
}

func withPrefix(all []string, prefix string) []string {
	var out []string
	for _, s := range all {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// addCompletions sets the completion of every command whose argument names
// something the cluster has.
func addCompletions(root *cobra.Command, g *globals) {
	jobIDs := fromMaster(g, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) ([]string, error) {
		limit := int32(maxListLimit)
		resp, err := c.ListJobs(ctx, &adminapi.TListJobsRequest{Limit: &limit})
		var ids []string
		for _, j := range resp.GetJobs() {
			ids = append(ids, strconv.FormatInt(j.JobID, 10)+"\t"+sanitize(j.GetMutationType()+" "+j.GetIndexName()+" "+j.GetMutationState()))
		}
		return ids, err
	})
	catalogs := fromMaster(g, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) ([]string, error) {
		cs, err := c.ListCatalogs(ctx)
		var names []string
		for _, x := range cs {
			names = append(names, x.Name)
		}
		return names, err
	})
	backends := fromMaster(g, func(ctx context.Context, c *adminapi.LanceMasterServiceClient) ([]string, error) {
		bs, err := c.ListBackends(ctx)
		var refs []string
		for _, b := range bs {
			refs = append(refs, strconv.FormatInt(b.BackendID, 10)+"\t"+b.Address)
		}
		return refs, err
	})
	optionKeys := func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		var keys []string
		for _, s := range options.Specs() {
			keys = append(keys, s.Key)
		}
		return withPrefix(keys, toComplete), noFiles
	}
	for _, c := range []struct {
		path []string
		fn   completer
	}{
		{[]string{"jobs", "show"}, jobIDs}, {[]string{"jobs", "cancel"}, jobIDs}, {[]string{"jobs", "resolve"}, jobIDs},
		{[]string{"jobs", "watch"}, jobIDs}, {[]string{"jobs", "logs"}, jobIDs},
		{[]string{"catalogs", "show"}, catalogs}, {[]string{"catalogs", "update"}, catalogs}, {[]string{"catalogs", "remove"}, catalogs},
		{[]string{"backends", "remove"}, backends}, {[]string{"backends", "show"}, backends},
		{[]string{"backends", "drain"}, backends}, {[]string{"backends", "undrain"}, backends},
		{[]string{"config", "get"}, optionKeys}, {[]string{"config", "set"}, optionKeys},
	} {
		if cmd, _, err := root.Find(c.path); err == nil && cmd.Name() == c.path[len(c.path)-1] && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = c.fn
		}
	}
}
