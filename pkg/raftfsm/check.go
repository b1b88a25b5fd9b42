package raftfsm

import (
	"errors"
	"fmt"
)

// decoders checks a command body of each registered type; register fills it.
var decoders = map[CommandType]func(body []byte) error{}

// ErrUnknownCommand: a command whose type this master does not know.
var ErrUnknownCommand = errors.New("raftfsm: unknown command type")

// CheckCommand reports whether cmd is a command this master can apply: a
// known type whose body decodes. A door that proposes bytes it did not build
// (forwardApply) must call it first: once committed, an entry no replica can
// apply stops every master.
func CheckCommand(cmd []byte) error {
	if len(cmd) == 0 {
		return ErrEmptyEntry
	}
	ct := CommandType(cmd[0])
	dec, ok := decoders[ct]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownCommand, ct)
	}
	if err := dec(cmd[1:]); err != nil {
		return fmt.Errorf("raftfsm: command type %d does not decode: %w", ct, err)
	}
	return nil
}
