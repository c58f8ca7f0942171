package main

import (
	"context"
	"errors"
	"io"
)

// importCmd is `d1bridge import`: being built.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("import: not built yet")
}
