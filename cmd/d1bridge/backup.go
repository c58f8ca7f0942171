package main

import (
	"context"
	"errors"
	"io"
)

// backupCmd is `d1bridge backup`: being built.
func backupCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("backup: not built yet")
}

// restoreCmd is `d1bridge restore`: being built.
func restoreCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("restore: not built yet")
}

// exportCmd is `d1bridge export`: being built.
func exportCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("export: not built yet")
}
