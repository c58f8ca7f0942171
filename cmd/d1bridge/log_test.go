package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestLogLevelAndFormat runs the binary with each log format: at the default
// level (info) a successful request writes no line and a failed one exactly
// one, with its status and duration in seconds; at debug both are written.
func TestLogLevelAndFormat(t *testing.T) {
	t.Parallel()
	t.Run("text at the default level", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "", "D1BRIDGE_LOG_FORMAT=text")
		okLines, failLines := twoRequests(t, s)
		if len(okLines) != 0 {
			t.Errorf("the successful request is logged at info: %q", okLines)
		}
		if len(failLines) != 1 {
			t.Fatalf("the failed request has %d lines, want 1: %q", len(failLines), failLines)
		}
		line := failLines[0]
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`^time=\S+ level=WARN msg=request `),
			regexp.MustCompile(` status=404( |$)`),
			regexp.MustCompile(` duration_seconds=\d+(\.\d+)?(e-\d+)?( |$)`),
			regexp.MustCompile(` kind=NotFound( |$)`),
			regexp.MustCompile(` op=MNRead.get( |$)`),
		} {
			if !want.MatchString(line) {
				t.Errorf("the failure's line %q does not match %s", line, want)
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(s.log.String()), "\n") {
			if !strings.HasPrefix(l, "time=") {
				t.Errorf("a line not in the text format: %q", l)
			}
		}
	})
	t.Run("json at debug", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "", "D1BRIDGE_LOG_FORMAT=json", "D1BRIDGE_LOG_LEVEL=debug")
		okLines, failLines := twoRequests(t, s)
		for what, lines := range map[string][]string{"successful": okLines, "failed": failLines} {
			if len(lines) != 1 {
				t.Fatalf("the %s request has %d lines, want 1: %q", what, len(lines), lines)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
				t.Fatalf("the %s request's line is not JSON: %v: %q", what, err, lines[0])
			}
			wantLevel, wantStatus := "DEBUG", 200.0
			if what == "failed" {
				wantLevel, wantStatus = "WARN", 404
			}
			if d, ok := m["duration_seconds"].(float64); m["msg"] != "request" || m["level"] != wantLevel || m["status"] != wantStatus || !ok || d < 0 || d > 60 {
				t.Errorf("the %s request's line: %v", what, m)
			}
		}
	})
}

// twoRequests sends a request that succeeds and one that fails (404), each
// with its own request id, stops the server so that its log is complete, and
// returns the lines naming each id.
func twoRequests(t *testing.T, s *server) (okLines, failLines []string) {
	t.Helper()
	if r := s.get(t, "/d1/mn/v2/node", "X-Request-Id", "log-test-ok"); r.Status != 200 {
		t.Fatalf("node: %d", r.Status)
	}
	if r := s.get(t, "/d1/mn/v2/object/no-such-object", "X-Request-Id", "log-test-fail"); r.Status != 404 {
		t.Fatalf("get of a missing object: %d", r.Status)
	}
	s.stop()
	for _, l := range strings.Split(s.log.String(), "\n") {
		switch {
		case strings.Contains(l, "log-test-ok"):
			okLines = append(okLines, l)
		case strings.Contains(l, "log-test-fail"):
			failLines = append(failLines, l)
		}
	}
	return okLines, failLines
}
