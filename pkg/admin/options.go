package admin

import (
	"context"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// GetOption returns one cluster-wide option.
func (s *Server) GetOption(ctx context.Context, key string) (*adminapi.TOption, error) {
	spec, ok := options.Lookup(key)
	if !ok {
		return nil, toAdminError(unknownOption(key))
	}
	st := s.d.Reader.State()
	return withOptionChange(st, optionView(spec, st.OptionValues())), nil
}

// SetOption validates and sets a cluster-wide option.
func (s *Server) SetOption(ctx context.Context, key, value, claimed string) (*adminapi.TOption, error) {
	canon, err := options.Validate(key, value)
	if err != nil {
		return nil, toAdminError(err)
	}
	who, err := claimOf(ctx, claimed)
	if err != nil {
		return nil, err
	}
	if err := s.current(ctx); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: s.nowMs(), Key: key, Value: canon, Audit: who}); err != nil {
		return nil, err
	}
	s.d.Logger.Info("option set", zap.String("key", key), zap.String("value", canon))
	return s.GetOption(ctx, key)
}

// ListOptions lists every option, sorted by key.
func (s *Server) ListOptions(ctx context.Context) ([]*adminapi.TOption, error) {
	st := s.d.Reader.State()
	stored := st.OptionValues()
	out := []*adminapi.TOption{}
	for _, spec := range options.Specs() {
		out = append(out, withOptionChange(st, optionView(spec, stored)))
	}
	return out, nil
}

func unknownOption(key string) error {
	_, err := options.Validate(key, "")
	return err
}

func optionView(spec options.Spec, stored map[string]string) *adminapi.TOption {
	v, set := stored[spec.Key]
	if !set {
		v = spec.Default
	}
	desc := spec.Description
	return &adminapi.TOption{Key: spec.Key, Value: v, DefaultValue: spec.Default, IsDefault: !set || v == spec.Default, Description: &desc}
}
