package main

import (
	"context"
	"errors"
	"io"
)

// registerCmd is `d1bridge register`: being built.
func registerCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("register: not built yet")
}
