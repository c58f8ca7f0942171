package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probeCmd is `d1bridge probe [URL]`: it exits 0 when URL answers 200 within
// --timeout, else 1 with what it answered. The image has no shell and no HTTP
// client, so this is what a container health check runs.
func probeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("probe")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if help, err := parseFlags(fs, args, stdout); help || err != nil {
		return err
	}
	url := "http://127.0.0.1:8080/readyz"
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		return fmt.Errorf("probe: one URL at most (d1bridge probe --help)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s answered %s: %s", url, resp.Status, body)
	}
	return nil
}
